"""ESPnet2 tasks that ESPnet2 lacks: image classification, image-to-sequence (OCR), lip reading."""
