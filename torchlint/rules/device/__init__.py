"""TL6xx: device placement and transfers."""
