"""TL2xx: host-device synchronisation."""
