#!/usr/bin/env python3
"""A static Helm chart repository over TLS, for tests and local trials: serves the
files of DIR (an index.yaml and chart archives, as `helm repo index` leaves them) and
writes each requested path to a log, so a test can prove what was (not) fetched.

Usage: hack/helm-repo-server.py --root DIR --port N --cert FILE --key FILE --log FILE
Prints "ready" on stdout once it listens.
"""
import argparse
import functools
import http.server
import ssl
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--log", required=True)
    args = p.parse_args()
    log = open(args.log, "a", buffering=1)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, fmt, *a):
            pass

        def do_GET(self):
            log.write(self.path + "\n")
            super().do_GET()

    handler = functools.partial(Handler, directory=args.root)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print("ready", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
