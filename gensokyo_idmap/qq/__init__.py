"""The QQ official bot platform side: wire models, webhook signatures, gateway, OpenAPI."""
