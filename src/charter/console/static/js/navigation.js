// In-page navigation: a new history entry, then the router (main.js) renders it on the
// popstate it listens to. Pages import this instead of the router, so no page depends
// on main.js.

export function navigate(path) {
  history.pushState(null, "", path);
  dispatchEvent(new PopStateEvent("popstate"));
  window.scrollTo(0, 0);
}
