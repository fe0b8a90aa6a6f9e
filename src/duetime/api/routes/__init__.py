"""One router per API resource; :data:`duetime.api.app.ROUTERS` lists them."""
