"""TL4xx: vectorisation and loops."""
