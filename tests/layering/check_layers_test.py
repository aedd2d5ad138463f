"""The layering check: the real tree passes, and a deliberately added upward include, an
undeclared layer or a cycle in the table fails with a message naming the file and line."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_layers.py"


def run(table, src):
    return subprocess.run([sys.executable, str(SCRIPT), "--table", str(table), "--src", str(src)],
                          capture_output=True, text=True)


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="orrery-layers-"))

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_the_repository_passes(self):
        result = run(ROOT / "cmake" / "layers.txt", ROOT / "src")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_an_upward_include_in_a_copy_of_the_tree_fails_naming_file_and_line(self):
        src = self.dir / "src"
        shutil.copytree(ROOT / "src", src)
        header = src / "chakra" / "trace_graph.h"
        lines = header.read_text().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("#include"))
        lines.insert(at, '#include "sim/simulation.h"')
        header.write_text("\n".join(lines) + "\n")
        result = run(ROOT / "cmake" / "layers.txt", src)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{header}:{at + 1}: includes \"sim/simulation.h\": layer chakra may not "
                      "use sim (cmake/layers.txt allows chakra: core proto)", result.stderr)

    def test_a_folder_without_a_line_and_a_cyclic_table_fail(self):
        src = self.dir / "src"
        (src / "core").mkdir(parents=True)
        (src / "extra").mkdir()
        (src / "core" / "a.h").write_text('#include "core/b.h"\n')
        table = self.dir / "layers.txt"
        table.write_text("core:\n")
        result = run(table, src)
        self.assertEqual(result.returncode, 1)
        self.assertIn("does not list", result.stderr)
        table.write_text("core: extra\nextra: core\n")
        result = run(table, src)
        self.assertEqual(result.returncode, 1)
        self.assertIn("cycle: core -> extra -> core", result.stderr)


if __name__ == "__main__":
    unittest.main()
