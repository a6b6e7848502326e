"""Sharp attention (image-to-sequence recognition with soft, hard and sharp attention): backbone, STN
localisers, sharpener, attention decoder and the ESPnet2 models that tie them together."""
