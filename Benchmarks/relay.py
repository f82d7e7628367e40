#!/usr/bin/env python3
"""A TCP relay that paces the server-to-client direction, per TCP connection or in total.

    Benchmarks/relay.py --listen PORT --backend PORT [--per-connection RATE | --total RATE]
                        [--slice MS | --burst SIZE] [--buffer SIZE] [--log FILE]

Accepts connections on 127.0.0.1:PORT and forwards each to the backend port as
raw bytes (TLS stays end to end between the client and the server).  Bytes from
the backend to the client go through a token bucket:

  --per-connection RATE  every accepted TCP connection has its own bucket (a CDN
                         that limits each flow; HTTP/2 streams on one connection
                         share it)
  --total RATE           one bucket for all connections (the server's uplink)
  neither                no limit (to measure the relay itself)

Pacing is smooth by default: reads of at most --slice ms worth of the rate
(default 10, at most 64 KiB), each sent when the bucket has the tokens.
--burst SIZE is bursty instead: reads and sends up to SIZE at once, then sleeps
SIZE / rate (nginx's default limit_rate pacing is --burst 2MiB).  The client-to-
server direction is never limited.

--buffer SIZE (default 256KiB) is the receive buffer of the socket to the
backend: what the server can send ahead of the pacer, like the bytes in flight
on a real path (5 MiB/s x 50 ms = 256 KiB).  Without it Linux grows the buffer
up to tcp_rmem's maximum (32 MiB here), and a client that cancels an HTTP/2
stream still receives, at the paced rate, megabytes the server had already sent.

RATE and SIZE: a number of bytes with an optional unit: k, K, KiB = 1024;
M, MiB = 1024^2; G, GiB = 1024^3; kB, KB, MB, GB = powers of 1000.  Examples:
5MiB, 5M, 10MB.  Python 3 stdlib only.
"""
import argparse
import asyncio
import re
import socket
import sys
import time

UNITS = {"": 1, "k": 1 << 10, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20,
         "G": 1 << 30, "GiB": 1 << 30, "kB": 10 ** 3, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9}
UNPACED_CHUNK = 256 << 10
MAX_SLICE = 64 << 10


def amount(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2) not in UNITS:
        raise argparse.ArgumentTypeError(f"not a size or rate: {text!r} (e.g. 5MiB, 10MB, 65536)")
    return float(m.group(1)) * UNITS[m.group(2)]


def positive(text):
    value = amount(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


class Bucket:
    """Token bucket with debt: take(n) reserves n bytes and sleeps until the
    reservation is covered, so concurrent takers queue in FIFO order (a shared
    bucket behaves like one link's queue)."""

    def __init__(self, rate, capacity):
        self.rate, self.capacity = rate, capacity
        self.tokens, self.t = capacity, time.monotonic()

    async def take(self, n):
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.t) * self.rate) - n
        self.t = now
        if self.tokens < 0:
            await asyncio.sleep(-self.tokens / self.rate)


class Relay:
    def __init__(self, args):
        self.args = args
        rate = args.per_connection or args.total
        if rate is None:
            self.chunk, self.capacity = UNPACED_CHUNK, None
        elif args.burst:
            self.chunk = self.capacity = int(args.burst)
        else:
            self.chunk = max(1024, min(MAX_SLICE, int(rate * args.slice / 1000)))
            self.capacity = max(self.chunk, rate * args.slice / 1000)
        self.shared = Bucket(args.total, self.capacity) if args.total else None
        self.count = 0
        self.log = open(args.log, "a", buffering=1) if args.log else None

    def bucket(self):
        if self.args.per_connection:
            return Bucket(self.args.per_connection, self.capacity)
        return self.shared

    async def serve(self):
        loop = asyncio.get_running_loop()
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.args.host, self.args.listen))
        listener.listen(512)
        listener.setblocking(False)
        print(f"relay on {self.args.host}:{listener.getsockname()[1]} -> "
              f"{self.args.backend_host}:{self.args.backend}", flush=True)
        while True:
            client, peer = await loop.sock_accept(listener)
            self.count += 1
            asyncio.create_task(self.connection(self.count, client, peer))

    async def connection(self, number, client, peer):
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        backend = socket.socket()
        if self.args.buffer:  # before connect: it sets the window scale
            backend.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(self.args.buffer))
        counts = [0, 0]  # bytes client->backend, backend->client
        for s in (client, backend):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await loop.sock_connect(backend, (self.args.backend_host, self.args.backend))
        except OSError as e:
            client.close()
            backend.close()
            self.note(f"conn {number} from {peer[1]}: backend connect failed: {e}")
            return
        bucket = self.bucket()

        async def pump(src, dst, k, bucket, chunk):
            while True:
                data = await loop.sock_recv(src, chunk)
                if not data:
                    break
                if bucket:
                    await bucket.take(len(data))
                await loop.sock_sendall(dst, data)
                counts[k] += len(data)
            dst.shutdown(socket.SHUT_WR)

        tasks = [asyncio.create_task(pump(client, backend, 0, None, UNPACED_CHUNK)),
                 asyncio.create_task(pump(backend, client, 1, bucket, self.chunk))]
        why = "closed"
        try:
            for t in asyncio.as_completed(tasks):
                await t  # an error in either direction ends both
        except OSError as e:
            why = f"{type(e).__name__}"
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            client.close()
            backend.close()
        self.note(f"conn {number} from {peer[1]}: {time.monotonic() - t0:.3f} s, "
                  f"down {counts[1]} B, up {counts[0]} B, {why}")

    def note(self, line):
        if self.log:
            self.log.write(line + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--listen", type=int, required=True, metavar="PORT", help="port to accept on (0: any)")
    ap.add_argument("--backend", type=int, required=True, metavar="PORT", help="port to forward to")
    ap.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ap.add_argument("--backend-host", default="127.0.0.1", help="backend address (default 127.0.0.1)")
    cap = ap.add_mutually_exclusive_group()
    cap.add_argument("--per-connection", type=positive, metavar="RATE", help="bytes/s for each TCP connection")
    cap.add_argument("--total", type=positive, metavar="RATE", help="bytes/s shared by all connections")
    pace = ap.add_mutually_exclusive_group()
    pace.add_argument("--slice", type=float, default=10.0, metavar="MS",
                      help="smooth pacing: send at most MS worth of the rate at a time (default 10)")
    pace.add_argument("--burst", type=positive, metavar="SIZE", help="bursty pacing: up to SIZE at once")
    ap.add_argument("--buffer", type=amount, default=256 << 10, metavar="SIZE",
                    help="receive buffer of the socket to the backend (default 256KiB; 0: the system's)")
    ap.add_argument("--log", metavar="FILE", help="append a line per closed connection")
    args = ap.parse_args()
    try:
        asyncio.run(Relay(args).serve())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
