"""fusebench: when does fusing GPU kernels pay, by how much, and why."""
