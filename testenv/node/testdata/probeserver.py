"""A pod's server for the kubelet prober tests (testenv/node).

Answers every connection on its ports with one HTTP 200 (a tcpSocket probe
just connects and closes) and logs JSON lines with wall-clock time_ns.

  probeserver.py close DRAIN   port 8080; at SIGTERM close the listener,
                               log listener_closed, live DRAIN seconds more
  probeserver.py count N       ports 8080 and 8081; after SIGTERM count the
                               accepted connections per port, exit once
                               8080 has N of them (log exit with the counts)
"""
import json
import select
import signal
import socket
import sys
import time

term = False


def on_term(signum, frame):
    global term
    term = True


def log(event, **fields):
    fields.update(event=event, time_ns=time.time_ns())
    print(json.dumps(fields), flush=True)


def listen(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)
    return s


def answer(conn):
    conn.settimeout(0.5)
    try:
        if conn.recv(4096):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
    except OSError:
        pass
    conn.close()


def serve(listeners, on_accept):
    """Accepts until on_accept returns False; returns when SIGTERM came."""
    while True:
        ready, _, _ = select.select(listeners, [], [], 0.05)
        for ln in ready:
            conn, _ = ln.accept()
            answer(conn)
            if on_accept(ln) is False:
                return
        if term and on_accept(None) is False:
            return


def close_mode(drain):
    ln = listen(8080)
    log("listening")
    serve([ln], lambda _: not term)
    ln.close()
    log("listener_closed")
    time.sleep(drain)
    log("exit")


def count_mode(n):
    lns = {listen(8080): "8080", listen(8081): "8081"}
    after = {"8080": 0, "8081": 0}
    log("listening")

    def on_accept(ln):
        if term and ln is not None:
            after[lns[ln]] += 1
        return after["8080"] < n

    serve(list(lns), on_accept)
    log("exit", after_term=after)


signal.signal(signal.SIGTERM, on_term)
if sys.argv[1] == "close":
    close_mode(float(sys.argv[2]))
else:
    count_mode(int(sys.argv[2]))
