"""TL1xx: data loading."""
