"""The package's shape in numbers: modules and folders, import circles
(strongly connected groups, imports inside functions included) and the
longest functions. docs/architecture.md's table comes from it.

    python3 scripts/layout_stats.py [REPO]      # default: this repository
"""
import ast, sys, pathlib
root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
pkg = root / "lancetnic_flow"
mods = sorted(pkg.rglob("*.py"))
folders = sorted({p.parent for p in mods})
print("modules", len(mods), "folders", len(folders))
def name(p):
    parts = p.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
known = {name(p) for p in mods}
graph = {}
for p in mods:
    me = name(p); base = me.split(".") if p.name == "__init__.py" else me.split(".")[:-1]
    deps = set()
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.ImportFrom):
            t = ".".join(base[:len(base)-node.level+1] + ([node.module] if node.module else [])) if node.level else (node.module or "")
            for a in node.names:
                full = f"{t}.{a.name}"
                deps.add(full if full in known else t)
    graph[me] = {d for d in deps if d in known and d != me and not me.startswith(d + ".")}
# strongly connected components (Tarjan)
idx = {}; low = {}; st = []; on = set(); sccs = []; c = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: sccs.append(sorted(comp))
for v in graph:
    if v not in idx: sc(v)
print("import circles (strongly connected groups):", len(sccs))
for s in sccs: print("  ", " ↔ ".join(x.replace("lancetnic_flow.", "") for x in s))
# floors (longest path) on condensed graph skipped; longest functions
fs = []
for p in mods:
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fs.append((node.end_lineno - node.lineno + 1, f"{name(p).replace('lancetnic_flow.', '')}.{node.name}"))
fs.sort(reverse=True)
print("functions over 80 lines:", sum(1 for n, _ in fs if n > 80))
print("longest:", ", ".join(f"{f} {n}" for n, f in fs[:5]))
