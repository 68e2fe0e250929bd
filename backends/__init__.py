"""In-tree backends. Each subpackage registers its targets and kernels on import."""
