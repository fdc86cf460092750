"""Installing the plugin's requirements both ways, for real: with the interpreter's own pip, and
with `uv pip install --python` for an interpreter without pip (v2.x's image venv may lack it).

Each case makes a fresh virtual environment in a temporary folder and installs a wheel made here
(offline: no index is asked), then imports it with that environment's interpreter. uv comes from
requirements-test.txt (it is found on PATH, or beside this interpreter as in a venv); without it
(Agent Zero's own Python) the tests that need it are skipped, saying so.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import venv
import zipfile

from honcho_hub.delivery import lifecycle

PROBE = "honcho_install_probe"
LOGGER = "honcho_hub.delivery.lifecycle"


def make_wheel(folder: str) -> str:
    """A minimal valid wheel of the package PROBE (pure Python, one module); its path."""
    name = f"{PROBE}-1.0"
    files = {
        f"{PROBE}/__init__.py": b"VALUE = 42\n",
        f"{name}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {PROBE}\nVersion: 1.0\n".encode(),
        f"{name}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n",
    }
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files[f"{name}.dist-info/RECORD"] = ("\n".join([*record, f"{name}.dist-info/RECORD,,"])
                                         + "\n").encode()
    path = os.path.join(folder, f"{name}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def find_uv() -> str | None:
    """uv from requirements-test.txt: on PATH, or in this interpreter's venv; None without it."""
    return shutil.which("uv") or shutil.which("uv", path=os.path.dirname(sys.executable))


UV = find_uv()
# Agent Zero's own Python (docs/reference.md, "Verify inside Agent Zero") has no uv; CI installs it.
needs_uv = unittest.skipIf(UV is None, "uv is missing: it is a test-only requirement"
                                       " (pip install -r requirements-test.txt)")


def interpreter(env_dir: str) -> str:
    return os.path.join(env_dir, "bin", "python")


def imports_probe(python: str) -> bool:
    done = subprocess.run([python, "-c", f"import {PROBE}; assert {PROBE}.VALUE == 42"],
                          capture_output=True, timeout=60, check=False)
    return done.returncode == 0


class InstallersTest(unittest.TestCase):
    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="honcho-install-")
        self.addCleanup(shutil.rmtree, self.folder, True)
        self.requirements = os.path.join(self.folder, "requirements.txt")
        with open(self.requirements, "w", encoding="utf-8") as handle:
            handle.write(make_wheel(self.folder) + "\n")
        # Both installers stay offline and keep their caches in the temporary folder.
        self.env = {"PIP_NO_INDEX": "1", "PIP_NO_CACHE_DIR": "1", "UV_OFFLINE": "1",
                    "UV_CACHE_DIR": os.path.join(self.folder, "uv-cache")}
        self.saved = {key: os.environ.get(key) for key in self.env}
        os.environ.update(self.env)
        self.addCleanup(self._restore)
        self.no_uv = os.path.join(self.folder, "empty-path")  # a PATH where no uv is
        os.mkdir(self.no_uv)

    def _restore(self) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def make_env(self, with_pip: bool) -> str:
        env_dir = os.path.join(self.folder, "with-pip" if with_pip else "without-pip")
        venv.EnvBuilder(with_pip=with_pip).create(env_dir)
        return interpreter(env_dir)

    @needs_uv
    def test_an_interpreter_with_pip_installs_with_pip_even_when_uv_is_on_path(self) -> None:
        python = self.make_env(with_pip=True)
        with self.assertLogs(LOGGER, "INFO") as logs:
            done = lifecycle.install_requirements(self.requirements, python=python,
                                                  search_path=os.path.dirname(UV))
        self.assertEqual(done, lifecycle.Installed("ok", "pip"))
        self.assertIn("requirements installed with pip", "\n".join(logs.output))
        self.assertTrue(imports_probe(python))

    @needs_uv
    def test_an_interpreter_without_pip_installs_with_uv_found_on_path(self) -> None:
        python = self.make_env(with_pip=False)
        self.assertFalse(imports_probe(python))
        with self.assertLogs(LOGGER, "INFO") as logs:
            done = lifecycle.install_requirements(self.requirements, python=python,
                                                  search_path=os.path.dirname(UV))
        self.assertEqual(done, lifecycle.Installed("ok", "uv"))
        self.assertIn("requirements installed with uv", "\n".join(logs.output))
        self.assertTrue(imports_probe(python))

    def test_without_pip_and_without_uv_nothing_runs_and_the_log_says_how_to_install(self) -> None:
        python = self.make_env(with_pip=False)
        with self.assertLogs(LOGGER, "WARNING") as logs:
            done = lifecycle.install_requirements(self.requirements, python=python,
                                                  search_path=self.no_uv)
        self.assertEqual(done, lifecycle.Installed("no_installer"))
        text = "\n".join(logs.output)
        self.assertIn("no pip and no uv was found on PATH", text)
        self.assertIn("uv pip install --python", text)
        self.assertFalse(imports_probe(python))

    @needs_uv
    def test_a_failing_installer_reports_failed_and_names_it(self) -> None:
        python = self.make_env(with_pip=False)
        with open(self.requirements, "w", encoding="utf-8") as handle:
            # offline, and no such wheel anywhere
            handle.write("honcho-install-probe-that-does-not-exist==9.9\n")
        with self.assertLogs(LOGGER, "WARNING") as logs:
            done = lifecycle.install_requirements(self.requirements, python=python,
                                                  search_path=os.path.dirname(UV))
        self.assertEqual(done, lifecycle.Installed("failed", "uv"))
        self.assertIn("uv exited with", "\n".join(logs.output))

    def test_an_interpreter_that_does_not_exist_has_no_installer(self) -> None:
        done = lifecycle.install_requirements(self.requirements, python="/nonexistent/python",
                                              search_path=self.no_uv)
        self.assertEqual(done, lifecycle.Installed("no_installer"))


class WithoutUvTest(unittest.TestCase):
    """Inside Agent Zero's own Python (docs/reference.md, "Verify inside Agent Zero") uv, a
    test-only requirement, may be missing: the tests that need it are skipped, saying why."""

    def test_without_uv_the_tests_that_need_it_are_skipped_saying_why(self) -> None:
        folder = tempfile.mkdtemp(prefix="honcho-no-uv-")
        self.addCleanup(shutil.rmtree, folder, True)
        python = interpreter(os.path.join(folder, "env"))
        venv.EnvBuilder(with_pip=False).create(os.path.dirname(os.path.dirname(python)))
        nothing = os.path.join(folder, "empty-path")  # no uv on PATH, none beside `python`
        os.mkdir(nothing)
        tests = os.path.dirname(os.path.abspath(__file__))
        env = {**os.environ, "PATH": nothing, "PYTHONPATH": tests}
        installers = f"{os.path.splitext(os.path.basename(__file__))[0]}.InstallersTest"
        done = subprocess.run([python, "-m", "unittest", "-v", installers],
                              cwd=os.path.dirname(tests), env=env, capture_output=True,
                              text=True, timeout=300, check=False)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertIn("skipped 'uv is missing", done.stderr)


if __name__ == "__main__":
    unittest.main()
