"""TL8xx: deprecated and slow APIs."""
