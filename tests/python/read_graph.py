"""Reads every commit of a graph with pylance, following docs/storage.md,
and checks it against the host's own export of that commit.

usage: read_graph.py <omnigraph-host binary> <graph root> <branch>...
"""
import json
import os
import subprocess
import sys

import lance


def read_graph(root, branch="main", seq=None):
    """The recipe of docs/storage.md: one consistent graph version."""
    commits = os.path.join(root, "_graph", "branches", branch)
    name = min(os.listdir(commits)) if seq is None else f"{2**64 - 1 - seq:020}.json"
    with open(os.path.join(commits, name)) as f:
        commit = json.load(f)
    with open(os.path.join(root, "_graph", "catalog.json")) as f:
        catalog = json.load(f)
    tables = {}
    for kind, folder in (("nodes", "nodes"), ("edges", "edges")):
        for t in catalog[kind]:
            pin = commit["tables"][t["name"]]
            uri = os.path.join(root, folder, t["name"] + ".lance")
            if "lance_branch" in pin:
                uri = os.path.join(uri, "tree", pin["lance_branch"])
            tables[t["name"]] = lance.dataset(uri, version=pin["version"]).to_table()
    return commit, tables


def exported_ids(binary, root, branch, seq):
    out = subprocess.run(
        [binary, "export", "--root", root, "--branch", branch, "--at", str(seq)],
        check=True, capture_output=True, text=True,
    ).stdout
    ids = set()
    for line in out.splitlines():
        record = json.loads(line)
        ids.add((record.get("type") or record.get("edge"), record["id"]))
    return ids


def main():
    binary, root, branches = sys.argv[1], sys.argv[2], sys.argv[3:]
    checked = 0
    for branch in branches:
        head, _ = read_graph(root, branch)
        seq = head["seq"]
        while True:
            commit, tables = read_graph(root, branch, seq)
            ids = {(name, i) for name, table in tables.items() for i in table.column("_id").to_pylist()}
            expected = exported_ids(binary, root, branch, seq)
            assert ids == expected, f"{branch}@{seq}: pylance {sorted(ids ^ expected)[:5]} differ from the export"
            checked += 1
            parent = commit.get("parent")
            if not parent or parent["branch"] != branch:
                break
            seq = parent["seq"]
    print(f"pylance read {checked} commits consistently with the host's export")


if __name__ == "__main__":
    main()
