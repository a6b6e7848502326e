"""Small real baseline models for the tasks ESPnet2 lacks: later models are compared against these."""
