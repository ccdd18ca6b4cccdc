"""TL0xx: suppressions."""
