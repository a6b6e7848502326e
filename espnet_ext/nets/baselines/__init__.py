"""Small real baseline models for the tasks ESPnet2 lacks, the reference the papers' models are compared with."""
