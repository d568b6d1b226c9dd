"""The OneBot v11 side: message format, events, transports and actions."""
