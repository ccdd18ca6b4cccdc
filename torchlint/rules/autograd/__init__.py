"""TL3xx: autograd and inference."""
