"""Swin transformer (backbone, classifier for ImageClassificationTask, drloc loss, checkpoint loading)."""
