#!/usr/bin/env python3
"""A page on https://127.0.0.1 that only opens with a client certificate.

Usage: client_cert_site.py CERT KEY CA PORT LOG
The TLS handshake requires a certificate issued by CA (ssl.CERT_REQUIRED);
the page names the certificate's subject and issuer, and each request is
logged as one line: the subject, then the User-Agent. Each connection's handshake
runs in its own thread with a 20 s timeout, so one stalled client holds
nothing up.
"""
import html
import http.server
import ssl
import sys
import threading

cert, key, ca, port, logfile = sys.argv[1:6]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.load_verify_locations(ca)
ctx.verify_mode = ssl.CERT_REQUIRED
log_lock = threading.Lock()


SHORT = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
         "emailAddress": "emailAddress"}


def name(parts):
    return ", ".join(f"{SHORT.get(k, k)}={v}" for rdn in parts for (k, v) in rdn)


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        peer = self.connection.getpeercert() or {}
        subject, issuer = name(peer.get("subject", ())), name(peer.get("issuer", ()))
        agent = self.headers.get("User-Agent", "")
        browser = next((w for w in agent.split() if w.startswith(("Firefox/", "HeadlessChrome/", "Chrome/"))), agent)
        with log_lock, open(logfile, "a") as f:
            f.write(f"subject={subject}\tagent={agent}\tpath={self.path}\n")
        body = (
            "<!doctype html><html><head><meta charset=utf-8><title>Signed in with keyshare</title></head>"
            "<body style='font-family:sans-serif;margin:40px;background:#f4f7f4'>"
            "<h1 style='color:#1d6b2f'>&#10003; Signed in with a client certificate</h1>"
            f"<p id=subject style='font-size:22px'>Subject: <b>{html.escape(subject)}</b></p>"
            f"<p id=issuer style='font-size:18px'>Issuer: {html.escape(issuer)}</p>"
            f"<p id=browser style='font-size:18px'>Browser: {html.escape(browser.replace('/', ' '))}</p>"
            "<p style='color:#555'>The browser signed the TLS handshake with a key kept by keyshare "
            "(libkeyshare-pkcs11.so).</p></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        sock, addr = self.socket.accept()
        sock.settimeout(20)
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            with log_lock, open(logfile, "a") as f:
                f.write(f"handshake refused: {e}\n")
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


Server(("127.0.0.1", int(port)), Page).serve_forever()
