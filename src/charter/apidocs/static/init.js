// Starts Swagger UI on this server's OpenAPI document. A file, not an inline script, so
// the page's Content-Security-Policy can forbid inline scripts. No validator badge (it
// would be fetched from another host); a token given to "Authorize" stays in this page's
// memory only (persistAuthorization is off).
"use strict";

window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  deepLinking: true,
  displayOperationId: true,
  showExtensions: true,
  showCommonExtensions: true,
  persistAuthorization: false,
  validatorUrl: null,
});
