"""The API reference at /docs in a real browser: with every request to another host
refused, Swagger UI still renders the operations, under the console's CSP (the `page`
fixture fails on any CSP refusal or page error)."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Page, Route, expect

from charter.api.security_headers import CSP
from tests.browser.world import Seeded

# What the Content-Security-Policy refused, as the page itself is told of it.
_RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(event.violatedDirective + " " + event.blockedURI);
});
"""


def test_swagger_ui_renders_with_nothing_from_another_host(
    page: Page, seeded: tuple[str, Seeded]
) -> None:
    base, _ = seeded
    own = urlsplit(base).netloc
    elsewhere: list[str] = []
    asked: list[str] = []

    def guard(route: Route) -> None:
        url = route.request.url
        asked.append(url)
        if urlsplit(url).netloc != own and not url.startswith(("data:", "blob:")):
            elsewhere.append(url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", guard)
    page.add_init_script(_RECORD_VIOLATIONS)
    response = page.goto(base + "/docs")
    assert response is not None
    assert response.status == 200
    assert response.headers["content-security-policy"] == CSP
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    expect(page.locator(".opblock-summary-path", has_text="/v1/processes").first).to_be_visible()
    assert operations.count() > 40
    expect(page.locator(".info .title")).to_contain_text("Charter")
    # Expanding an operation renders its schemas too.
    page.locator(".opblock-summary-path", has_text="/v1/actors").first.click()
    expect(page.locator(".opblock-body").first).to_be_visible()
    assert page.evaluate("window.__violations") == []
    assert elsewhere == []
    assert any(url.endswith("/openapi.json") for url in asked)
