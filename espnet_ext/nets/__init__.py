"""Network building blocks that ESPnet2 lacks, registered into its tasks."""
