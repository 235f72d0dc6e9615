#!/usr/bin/env python3
"""Which Fortran MPI entry points reach the C MPI_ functions, and which call
PMPI_ directly (so that a C PMPI wrapper never sees them)? Checked on the MPI
library's own Fortran binding libraries with nm and objdump, and compared with
what libtessera-pmpi exports:

  fortran_layering.py --nm NM --objdump OBJDUMP --tool libtessera-pmpi.so --lib LIB [--lib LIB ...]

For every routine the tool claims to cover from Fortran, every binding symbol
the MPI library exports for it (mpif.h / `use mpi`: mpi_<r>_; `use mpi_f08`:
mpi_<r>_f08_ or mpi_<r>_f08ts_) must either reach the C function MPI_<R>
(counted by the C wrapper) or be exported by the tool (its Fortran wrapper).
Prints the table (docs/ENERGY.md quotes it) and exits 1 on a gap.
"""
import argparse
import bisect
import re
import subprocess
import sys

CLAIMED = """init init_thread finalize
send bsend ssend rsend isend ibsend issend irsend send_init bsend_init ssend_init rsend_init
recv irecv recv_init sendrecv sendrecv_replace mprobe improbe mrecv imrecv
wait waitall waitany waitsome test testall testany testsome request_free start startall
barrier ibarrier bcast ibcast reduce ireduce allreduce iallreduce gather igather gatherv igatherv
scatter iscatter scatterv iscatterv allgather iallgather allgatherv iallgatherv alltoall ialltoall
alltoallv ialltoallv alltoallw ialltoallw reduce_scatter ireduce_scatter reduce_scatter_block
ireduce_scatter_block scan iscan exscan iexscan
neighbor_allgather ineighbor_allgather neighbor_allgatherv ineighbor_allgatherv neighbor_alltoall
ineighbor_alltoall neighbor_alltoallv ineighbor_alltoallv neighbor_alltoallw ineighbor_alltoallw
put get rput rget accumulate raccumulate get_accumulate rget_accumulate fetch_and_op compare_and_swap
file_read file_read_all file_read_shared file_read_ordered file_write file_write_all file_write_shared
file_write_ordered file_read_at file_read_at_all file_write_at file_write_at_all file_iread file_iread_all
file_iread_shared file_iwrite file_iwrite_all file_iwrite_shared file_iread_at file_iread_at_all file_iwrite_at
file_iwrite_at_all file_read_all_end file_read_at_all_end file_read_ordered_end file_write_all_end
file_write_at_all_end file_write_ordered_end""".split()
# Reported, not counted from Fortran: Fortran's MPI_Pcontrol has no region name.
OTHERS = ["pcontrol"]


class Lib:
    def __init__(self, path, nm, objdump):
        self.path = path
        self.syms = {}  # name -> (addr, size)
        out = subprocess.run([nm, "-D", "-S", "--defined-only", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 4:
                self.syms[f[3]] = (int(f[0], 16), int(f[1], 16))
            elif len(f) == 3:
                self.syms[f[2]] = (int(f[0], 16), 0)
        self.objdump = objdump
        self._code = None

    def code(self):
        if self._code is None:
            out = subprocess.run([self.objdump, "-d", "--no-show-raw-insn", self.path], capture_output=True,
                                 text=True).stdout
            addrs, ins = [], []
            pat = re.compile(r"^\s*([0-9a-f]+):\s*(\S+)\s*(.*)$")
            for line in out.splitlines():
                m = pat.match(line)
                if m:
                    addrs.append(int(m.group(1), 16))
                    ins.append((m.group(2), m.group(3)))
            self._code = (addrs, ins)
        return self._code

    def calls(self, addr, size):
        """Call and jump targets of the function at addr: (plt names, local addresses)."""
        addrs, ins = self.code()
        i = bisect.bisect_left(addrs, addr)
        names, local = [], []
        n = 0
        while i < len(addrs) and n < 600:
            if size and addrs[i] >= addr + size:
                break
            op, arg = ins[i]
            if op.startswith("call") or op.startswith("jmp"):
                m = re.search(r"([0-9a-f]+) <([^>]+)>", arg)
                if m:
                    target, label = int(m.group(1), 16), m.group(2)
                    if label.endswith("@plt"):
                        names.append(label[:-4])
                    elif not (addr <= target < addr + max(size, 1)):
                        local.append(target)
            if not size and op.startswith("ret"):
                break
            i += 1
            n += 1
        return names, local


def reaches(libs, lib, addr, size, routine, depth=0, seen=None):
    """'C' if the code reaches MPI_<routine>, 'PMPI' if PMPI_<routine>, else None."""
    seen = seen if seen is not None else set()
    if depth > 3 or (lib.path, addr) in seen:
        return None
    seen.add((lib.path, addr))
    names, local = lib.calls(addr, size)
    for n in names:
        low = n.lower()
        if low in (f"mpi_{routine}", f"mpi_{routine}_c"):
            return "C"
        if low in (f"pmpi_{routine}", f"pmpi_{routine}_c"):
            return "PMPI"
    for n in names:  # a helper in another of the MPI's libraries (Open MPI: ompi_send_f)
        for other in libs:
            if n in other.syms and not n.startswith(("MPI_", "PMPI_")):
                r = reaches(libs, other, *other.syms[n], routine, depth + 1, seen)
                if r:
                    return r
    for a in local:
        r = reaches(libs, lib, a, 0, routine, depth + 1, seen)
        if r:
            return r
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--objdump", default="objdump")
    ap.add_argument("--tool", required=True)
    ap.add_argument("--lib", action="append", required=True)
    args = ap.parse_args()
    libs = [Lib(p, args.nm, args.objdump) for p in args.lib if p.endswith(".so") or ".so." in p]
    tool = Lib(args.tool, args.nm, args.objdump)
    gaps, rows = [], []
    for routine in CLAIMED + OTHERS:
        for family, sym in (("mpif.h/use mpi", f"mpi_{routine}_"), ("use mpi_f08", f"mpi_{routine}_f08_"),
                            ("use mpi_f08", f"mpi_{routine}_f08ts_")):
            lib = next((l for l in libs if sym in l.syms), None)
            if lib is None:
                continue
            route = reaches(libs, lib, *lib.syms[sym], routine) or "?"
            wrapped = sym in tool.syms
            c_wrapped = any(s.startswith("MPI_") and not s.isupper() and s.lower() == f"mpi_{routine}"
                            for s in tool.syms)
            if route == "C":
                covered = "C wrapper" if c_wrapped else "not covered"
            elif wrapped:
                covered = "Fortran wrapper"
            else:
                covered = "not covered"
            rows.append((routine, family, sym, lib.path.split("/")[-1], route, covered))
            if routine in CLAIMED and covered == "not covered":
                gaps.append(f"{sym} ({route})")
    w = max(len(r[2]) for r in rows) if rows else 10
    print(f"{'routine':24} {'binding':16} {'symbol':{w}} {'library':26} {'calls':6} counted by")
    for r in rows:
        print(f"{r[0]:24} {r[1]:16} {r[2]:{w}} {r[3]:26} {r[4]:6} {r[5]}")
    if gaps:
        print(f"\n{len(gaps)} Fortran entry point(s) the tool claims but misses: " + ", ".join(gaps))
        sys.exit(1)
    print(f"\nOK: every claimed Fortran routine is counted ({len(rows)} binding symbols checked)")


if __name__ == "__main__":
    main()
