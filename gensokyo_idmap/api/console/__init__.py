"""The operator console at ``/ui/`` (pages.py), its sessions, rates and chart."""
