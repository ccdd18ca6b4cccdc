"""TL5xx: memory."""
