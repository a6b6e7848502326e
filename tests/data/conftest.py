"""A local HTTP server for the download tests (127.0.0.1 only: the tests need no network)."""

import http.server
import re
import threading

import pytest


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.root``, honouring ``Range: bytes=N-`` when ``server.ranges``; logs requests."""

    def do_GET(self):
        self.server.requests.append((self.path, self.headers.get("Range")))
        path = self.server.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        start = int(match.group(1)) if match and self.server.ranges else 0
        if start >= len(data) > 0 and match and self.server.ranges:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.end_headers()
            return
        if start:
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])

    def log_message(self, *args):
        pass


@pytest.fixture()
def http_server(tmp_path):
    """Serves ``tmp_path/www`` (``.root``) at ``.url``; ``.requests`` lists (path, Range header)."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RangeHandler)
    httpd.root, httpd.requests, httpd.ranges = root, [], True
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()
