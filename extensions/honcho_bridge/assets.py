"""The plugin's web files as Agent Zero serves them: versioned URLs and revalidation headers.

v2.x's web UI runs a service worker that caches same-origin JS, CSS and HTML, so after an update the
browser could run old files, or old and new ones mixed. Every URL our HTML and JS use for our own
files is served carrying the version of our web files (a digest of their content: any change gives
every URL a new one), and each of our files is served with `Cache-Control: no-cache` and an ETag
(a rewritten one without `Last-Modified`: its body changes when another file does).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import Any

from .host import PLUGIN_DIR, PLUGIN_NAME, call_argument

WEB_FOLDERS = ("webui", os.path.join("extensions", "webui"))  # what Agent Zero serves of a plugin
REWRITTEN = (".html", ".js", ".mjs", ".css")  # files that name other files of ours
VERSION_CHARS = 12
# Our own files as our HTML and JS name them (Agent Zero serves a plugin at both prefixes), in
# quotes or parentheses and not yet carrying a query.
OWN_URL = re.compile(r"""(?<=["'(])(/(?:usr/)?plugins/""" + re.escape(PLUGIN_NAME)
                     + r"""/(?:webui|extensions/webui)/[\w./-]+)(?=["')])""")

_lock = threading.Lock()
_known: tuple[tuple, str] | None = None  # (the web files' stat signature, their version)


def versioned_response(data: Any) -> str:
    """At the end of Agent Zero's `_serve_plugin_asset`: for one of our HTML, JS or CSS files,
    the same file with versioned URLs of ours, an ETag of that content, `no-cache` and no
    Last-Modified (a request carrying that ETag gets 304); other plugins' files are left as Agent
    Zero serves them. Returns what it did."""
    plugin = call_argument(data, 1, "plugin_name")
    asset = call_argument(data, 2, "asset_path")
    response = data.get("result")
    # 304: Agent Zero's send_file answered an If-Modified-Since by the file's own date, which says
    # nothing of a rewritten body (it names the other files' versions): rewritten and asked again.
    if plugin != PLUGIN_NAME or not isinstance(asset, str) or getattr(response, "status_code",
                                                                       None) not in (200, 304):
        return "not_ours"
    response.cache_control.no_cache = True
    if not asset.endswith(REWRITTEN):
        return "headers"
    data["result"] = _rewritten(response, os.path.join(PLUGIN_DIR, asset))
    return "versioned"


def web_version(plugin_dir: str = PLUGIN_DIR) -> str:
    """A digest of every web file of the plugin (names and content), read again only when one of
    them changed (a few `stat` calls a request)."""
    global _known
    files = _web_files(plugin_dir)
    signature = tuple((path, info.st_mtime_ns, info.st_size, info.st_ino) for path, info in files)
    with _lock:
        if _known is not None and _known[0] == signature:
            return _known[1]
    digest = hashlib.blake2b(digest_size=VERSION_CHARS // 2)
    for path, _ in files:
        digest.update(os.path.relpath(path, plugin_dir).encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read() + b"\0")
    version = digest.hexdigest()
    with _lock:
        _known = (signature, version)
    return version


def versioned_urls(text: str, version: str) -> str:
    """`text` with `?v=<version>` on each URL of our own web files."""
    return OWN_URL.sub(lambda match: f"{match.group(1)}?v={version}", text)


def _rewritten(original: Any, path: str) -> Any:
    from flask import Response, request  # Agent Zero's web framework

    with open(path, encoding="utf-8") as handle:
        body = versioned_urls(handle.read(), web_version()).encode("utf-8")
    response = Response(body, status=200, headers={"Content-Type": original.content_type})
    original.close()  # the file Agent Zero opened for it
    response.cache_control.no_cache = True
    # No Last-Modified: the body also carries the other files' versions, so the file's own date
    # would answer an If-Modified-Since with 304 after another file changed. The ETag revalidates.
    response.set_etag(hashlib.blake2b(body, digest_size=16).hexdigest())
    return response.make_conditional(request)


def _web_files(plugin_dir: str) -> list[tuple[str, os.stat_result]]:
    found = []
    for folder in WEB_FOLDERS:
        for root, dirs, names in os.walk(os.path.join(plugin_dir, folder)):
            dirs.sort()
            found.extend((os.path.join(root, name), os.stat(os.path.join(root, name)))
                         for name in sorted(names))
    return found
