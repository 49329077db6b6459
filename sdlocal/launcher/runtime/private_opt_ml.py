"""The process runtime's private `/opt/ml`: the training runs in a mount namespace of its own where
the host's job folder is mounted on `/opt/ml`, so a script that writes under `/opt/ml/...` itself
(its own `SummaryWriter("/opt/ml/output/tensorboard")`, `torch.save(model, "/opt/ml/model/...")`,
a config file it reads from `/opt/ml/input/config`) works in the job's folder, never in this host's
`/opt/ml`, and nothing is mounted outside the namespace.

    python -I -S private_opt_ml.py JOB_ROOT -- COMMAND...   enter the namespace, exec COMMAND
    python -I -S private_opt_ml.py --probe                   exit 0 when this machine allows it

Run as a script (stdlib only, no site, no sdlocal import: a few ms before the training starts);
`exec` keeps the process id, so the runtime's process group, signals and exit code are the
training's own. As root: `unshare(CLONE_NEWNS)`; as another user: a user namespace too
(`CLONE_NEWUSER`, this user mapped to root inside), where the kernel allows unprivileged ones.
Mounts are made private first (nothing propagates back to the host), then:
- `/opt/ml` exists here: the job folder is bind-mounted on it;
- else `/opt` exists: an overlay over `/opt` (the host's `/opt` read-only below, a tmpfs above:
  whatever the training writes under `/opt` stays in the namespace) gets an `ml` folder, and the
  job folder is bind-mounted on it. The tmpfs is mounted on a temporary folder, detached once the
  overlay holds it, and the folder removed: nothing is left on the host;
- no `/opt`: no place for the mount (an error).
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
OPT = "/opt"


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(libc: ctypes.CDLL, source: str, target: str, fstype: str | None, flags: int, data: str | None,
           what: str) -> None:
    _check(libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                      data.encode() if data else None), what)


def _unshare(libc: ctypes.CDLL) -> None:
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        return
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def enter(job_root: str, opt: str = OPT) -> None:
    """This process (and what it starts) sees `job_root` on `<opt>/ml`; OSError naming the step that failed."""
    libc = _libc()
    if not os.path.isdir(job_root):
        raise OSError(errno.ENOENT, f"the job folder {job_root} does not exist")
    _unshare(libc)
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE, None, "making the mounts private")
    target = os.path.join(opt, "ml")
    if not os.path.isdir(target):
        if not os.path.isdir(opt):
            raise OSError(errno.ENOENT, f"{opt} does not exist: no place to mount the job folder on {target}")
        import tempfile  # only here: the common start (a bind on an existing /opt/ml) stays lean

        stage = tempfile.mkdtemp(prefix="sdlocal-opt-")
        try:
            _mount(libc, "tmpfs", stage, "tmpfs", 0, "mode=0755", f"tmpfs on {stage}")
            try:
                os.mkdir(os.path.join(stage, "upper"))
                os.mkdir(os.path.join(stage, "work"))
                _mount(libc, "overlay", opt, "overlay", 0,
                       f"lowerdir={opt},upperdir={stage}/upper,workdir={stage}/work", f"an overlay over {opt}")
                os.mkdir(target)
            finally:
                libc.umount2(stage.encode(), MNT_DETACH)  # the overlay keeps what it uses of it
        finally:
            os.rmdir(stage)
    _mount(libc, job_root, target, None, MS_BIND | MS_REC, None, f"the job folder on {target}")


def probe() -> None:
    """Enter the namespace with an empty folder (this process only): OSError when the machine refuses."""
    import tempfile

    folder = tempfile.mkdtemp(prefix="sdlocal-probe-")
    try:
        enter(folder)
        written = os.path.join(OPT, "ml", "probe")
        with open(written, "w") as f:
            f.write("ok")
        os.remove(written)
    finally:
        os.rmdir(folder)


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--probe"]:
            probe()
            return 0
        if len(argv) < 3 or argv[1] != "--":
            print("usage: private_opt_ml.py JOB_ROOT -- COMMAND... | --probe", file=sys.stderr)
            return 2
        enter(argv[0])
    except OSError as e:
        print(f"sdlocal: cannot give the training a private /opt/ml: {e.strerror or e}", file=sys.stderr)
        return 1
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as e:
        print(f"sdlocal: cannot start {argv[2]}: {e.strerror or e}", file=sys.stderr)
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
