# A persistent workload for the tests, speaking the frames protocol of
# docs/workload-protocol.md by hand: it reads id,value chunks and writes
# id,score with score = value. Arguments: a file it appends a line to when
# it starts, and the seconds it sleeps before its first chunk. The job's
# parameters name chunks to misbehave on, on their first attempt only:
# crash (exit mid-chunk), hang (sleep for ever), error (an error frame),
# garbage (bytes that are no frame), trailing (a second, well-formed
# answer after the chunk's done frame: the row stray,999 and a done).
import json, os, sys, time

starts, delay = sys.argv[1], float(sys.argv[2])
with open(starts, "a") as f:
    f.write("%d %s\n" % (os.getpid(), os.environ.get("SCIMESH_PROTOCOL", "")))
time.sleep(delay)
rd, wr = sys.stdin.buffer, sys.stdout.buffer

def frame():
    line = rd.readline()
    if not line:
        return None, None
    kind, n = line.decode().split(" ")
    return kind, rd.read(int(n))

def send(kind, body=b""):
    wr.write(b"%s %d\n" % (kind.encode(), len(body)) + body)
    wr.flush()

while True:
    kind, body = frame()
    if kind is None:
        sys.exit(0)
    assert kind == "task", kind
    task = json.loads(body)
    kind, data = frame()
    assert kind == "input", kind
    p, first = task["parameters"], task["attempt"] == 1
    i = task["chunk_index"]
    print("chunk %d in %s" % (i, os.path.basename(task["work_dir"])), file=sys.stderr, flush=True)
    if first and p.get("crash") == i:
        sys.exit(3)
    if first and p.get("hang") == i:
        time.sleep(3600)
    if first and p.get("error") == i:
        send("error", b"no luck with this chunk")
        continue
    if first and p.get("garbage") == i:
        wr.write(b"id,score\nx,1\n")
        wr.flush()
        time.sleep(3600)
    lines = data.decode().splitlines()
    out = ["id,score"] + lines[1:]
    body = ("\n".join(out) + "\n").encode()
    send("output", body[:5])
    send("output", body[5:])
    send("done")
    if first and p.get("trailing") == i:
        send("output", b"id,score\nstray,999\n")
        send("done")
