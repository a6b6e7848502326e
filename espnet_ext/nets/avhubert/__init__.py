"""AV-HuBERT's visual speech encoder (Shi et al. 2022) as an ESPnet2 encoder, and fairseq checkpoint loading."""
