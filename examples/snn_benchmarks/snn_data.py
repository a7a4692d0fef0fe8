"""Readers for the three benchmarks of the SNN paper (Klambauer et al. 2017).

* `UCI121(path)`: the 121 UCI data sets as preprocessed by Fernández-Delgado et al. (JMLR
  2014). `path` is a folder holding the data sets (`<name>/<name>.txt`, ...), its parent
  (`uci121/<name>/...`), a tar archive of it (any compression tarfile reads), or a folder
  holding one such archive. Each data set's `<name>.txt` names its data file `fich1` (rows:
  an index, the already standardized features, the class 0..n_clases-1, after a header line)
  and `conxuntos.dat` holds two lines, the 0-based row indices of the training half and of
  the test half of `fich1`; a second file `fich2` (some sets ship a separate test file) is
  not part of that split and is not read, as in the paper. Where `fich1` is missing but an
  `.arff` of the same rows is there (statlog-shuttle in the shared copy), the `.arff` is
  read. `n_examples` is `n_patrons1 + n_patrons2`, the size by which the paper counts the
  46 sets with at least 1000 examples.
* `load_htru2(path)`: HTRU2 (Lyon et al. 2016), 17,898 pulsar candidates, 8 features; `path`
  is `HTRU_2.arff` / `HTRU_2.csv` or a folder holding one.
* `load_tox21(path)`: Tox21 as DeepChem distributes it (`tox21.csv.gz`: 12 assay columns
  with NaN for "not measured", `mol_id`, `smiles`); `path` is the file or its folder.
  `morgan_fingerprints(smiles)` featurizes with RDKit (the `examples` extra).

    python examples/snn_benchmarks/snn_data.py --uci DIR --htru2 DIR --tox21 DIR
"""

import argparse
import dataclasses
import gzip
import io
import pathlib
import tarfile

import numpy as np

#: The 12 Tox21 assays, in the challenge's (and DeepChem's) order.
TOX21_TASKS = (
    "NR-AR",
    "NR-AR-LBD",
    "NR-AhR",
    "NR-Aromatase",
    "NR-ER",
    "NR-ER-LBD",
    "NR-PPAR-gamma",
    "SR-ARE",
    "SR-ATAD5",
    "SR-HSE",
    "SR-MMP",
    "SR-p53",
)


@dataclasses.dataclass(frozen=True)
class UCIDataset:
    """One UCI data set, split as `conxuntos.dat` says."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    n_classes: int
    n_examples: int


def parse_info(text):
    """`<name>.txt` (`key= value` lines) as a dict of strings."""
    info = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            info[key.strip()] = value.strip()
    return info


def parse_r_dat(text, n_features):
    """A `_R.dat` file: a header line, then `index f1 ... fn class` per row."""
    lines = [line for line in text.splitlines()[1:] if line.strip()]
    table = np.array([line.split() for line in lines], dtype="float64")
    if table.ndim != 2 or table.shape[1] != n_features + 2:
        raise ValueError(
            f"expected rows of 1 index, {n_features} features and the class; "
            f"got shape {table.shape}"
        )
    return table[:, 1:-1].astype("float32"), table[:, -1].astype("int64")


def parse_arff(text):
    """A numeric ARFF file (comma-separated data lines, class last): (features, labels)."""
    rows = []
    in_data = False
    for line in text.replace("\r", "\n").split("\n"):
        line = line.strip()
        if not line or line.startswith("%"):
            continue
        if in_data:
            rows.append(line.split(","))
        elif line.lower().startswith("@data"):
            in_data = True
    table = np.array(rows, dtype="float64")
    return table[:, :-1].astype("float32"), table[:, -1].astype("int64")


def parse_split(text):
    """`conxuntos.dat`: (training indices, test indices)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 2:
        raise ValueError(f"conxuntos.dat must have 2 lines of indices, got {len(lines)}")
    return tuple(np.array(line.split(), dtype="int64") for line in lines)


class _Files:
    """Read-only access to the files of a folder or of a tar archive, by relative path."""

    def __init__(self, path):
        path = pathlib.Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no such file or folder: {path}")
        if path.is_dir():
            archives = sorted(p for p in path.iterdir() if p.is_file() and _is_tar(p))
            has_sets = any(p.is_dir() for p in path.iterdir())
            if archives and not has_sets:
                path = archives[0]
        self.path = path
        self._members = None
        if path.is_file():
            with tarfile.open(path) as tar:  # one pass: xz archives are not seekable
                self._members = {
                    m.name.lstrip("./"): tar.extractfile(m).read() for m in tar if m.isfile()
                }

    def names(self):
        if self._members is not None:
            return sorted(self._members)
        return sorted(str(p.relative_to(self.path)) for p in self.path.rglob("*") if p.is_file())

    def read(self, name):
        if self._members is not None:
            return self._members[name].decode("latin-1")
        return (self.path / name).read_text(encoding="latin-1")


def _is_tar(path):
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


class UCI121:
    """The Fernández-Delgado et al. UCI collection: `names`, `info(name)`, `load(name)`."""

    def __init__(self, path):
        self.files = _Files(path)
        self._dirs = {}
        for name in self.files.names():
            parts = name.split("/")
            # <...>/<set>/<set>.txt, not the sub-folders some sets carry (con_patrons_repetidos)
            if len(parts) >= 2 and parts[-1] == parts[-2] + ".txt":
                folder = "/".join(parts[:-1])
                if parts[-2] not in self._dirs or len(folder) < len(self._dirs[parts[-2]]):
                    self._dirs[parts[-2]] = folder
        if not self._dirs:
            raise ValueError(f"no UCI data set (<name>/<name>.txt) found in {path}")
        self._all = set(self.files.names())
        self._info = {}

    @property
    def names(self):
        """Every data set's name, sorted."""
        return sorted(self._dirs)

    def info(self, name):
        """`<name>.txt` as a dict, plus `n_examples` (int) and `complete` (bool)."""
        if name in self._info:
            return self._info[name]
        folder = self._dirs[name]
        info = parse_info(self.files.read(f"{folder}/{name}.txt"))
        info["n_examples"] = int(info["n_patrons1"]) + int(info.get("n_patrons2", 0))
        info["n_classes"] = int(info["n_clases"])
        info["n_features"] = int(info["n_entradas"])
        info["complete"] = self._data_file(name) is not None
        self._info[name] = info
        return info

    def _data_file(self, name):
        folder = self._dirs[name]
        fich1 = parse_info(self.files.read(f"{folder}/{name}.txt"))["fich1"]
        for candidate in (fich1, fich1.replace("_R.dat", ".arff")):
            if f"{folder}/{candidate}" in self._all:
                return f"{folder}/{candidate}"
        return None

    def complete(self, min_examples=0):
        """The names of the sets whose split can be read, with at least `min_examples`."""
        return [
            n
            for n in self.names
            if self.info(n)["complete"] and self.info(n)["n_examples"] >= min_examples
        ]

    def load(self, name):
        """The data set `name` as a `UCIDataset` (the split of `conxuntos.dat`)."""
        if name not in self._dirs:
            raise KeyError(f"no data set {name!r}; known: {', '.join(self.names)}")
        info = self.info(name)
        data_file = self._data_file(name)
        if data_file is None:
            raise FileNotFoundError(f"{name}: the data file {info['fich1']} is missing")
        text = self.files.read(data_file)
        if data_file.endswith(".arff"):
            x, y = parse_arff(text)
        else:
            x, y = parse_r_dat(text, info["n_features"])
        if len(x) != int(info["n_patrons1"]):
            raise ValueError(f"{name}: {len(x)} rows, expected n_patrons1={info['n_patrons1']}")
        train, test = parse_split(self.files.read(f"{self._dirs[name]}/conxuntos.dat"))
        return UCIDataset(
            name, x[train], y[train], x[test], y[test], info["n_classes"], info["n_examples"]
        )


def _find(path, names):
    path = pathlib.Path(path)
    if path.is_file():
        return path
    for name in names:
        if (path / name).is_file():
            return path / name
    raise FileNotFoundError(f"none of {', '.join(names)} in {path}")


def load_htru2(path):
    """HTRU2: features (17898, 8) float32 and labels (17898,) int64 (1 = pulsar)."""
    file = _find(path, ("HTRU_2.arff", "HTRU_2.csv"))
    text = file.read_text(encoding="latin-1")
    if file.suffix == ".arff":
        return parse_arff(text)
    table = np.loadtxt(io.StringIO(text.replace("\r", "\n")), delimiter=",", ndmin=2)
    return table[:, :-1].astype("float32"), table[:, -1].astype("int64")


def load_tox21(path):
    """Tox21: (SMILES list, labels (n, 12) float32 with NaN where not measured, task names)."""
    import csv

    file = _find(path, ("tox21.csv.gz", "tox21.csv"))
    raw = file.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    missing = [t for t in TOX21_TASKS if rows and t not in rows[0]]
    if missing or not rows or "smiles" not in rows[0]:
        raise ValueError(f"{file}: expected the columns smiles and {', '.join(TOX21_TASKS)}")
    labels = np.array(
        [[float(r[t]) if r[t] != "" else np.nan for t in TOX21_TASKS] for r in rows],
        dtype="float32",
    )
    return [r["smiles"] for r in rows], labels, TOX21_TASKS


def morgan_fingerprints(smiles, radius=2, n_bits=2048):
    """ECFP-like Morgan bit vectors (RDKit), shape (n, n_bits) float32, and a validity mask.

    `radius=2` is ECFP4. Molecules RDKit cannot parse get an all-zero row and `False`.
    """
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    RDLogger.DisableLog("rdApp.*")
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    features = np.zeros((len(smiles), n_bits), dtype="float32")
    valid = np.zeros(len(smiles), dtype=bool)
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        if mol is not None:
            features[i] = generator.GetFingerprintAsNumPy(mol)
            valid[i] = True
    return features, valid


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uci", help="the UCI-121 folder or archive")
    parser.add_argument("--htru2", help="the HTRU2 file or folder")
    parser.add_argument("--tox21", help="the Tox21 file or folder")
    args = parser.parse_args(argv)
    if args.uci:
        uci = UCI121(args.uci)
        for name in uci.names:
            info = uci.info(name)
            print(
                f"{name:40s} {info['n_examples']:7d} examples {info['n_classes']:3d} classes "
                f"{'complete' if info['complete'] else 'INCOMPLETE'}"
            )
        print(
            f"{len(uci.complete())} of {len(uci.names)} complete, "
            f"{len(uci.complete(1000))} complete with >= 1000 examples"
        )
    if args.htru2:
        x, y = load_htru2(args.htru2)
        print(f"HTRU2: {x.shape}, {int(y.sum())} pulsars")
    if args.tox21:
        smiles, labels, tasks = load_tox21(args.tox21)
        print(
            f"Tox21: {len(smiles)} molecules, measured per assay:",
            dict(zip(tasks, (~np.isnan(labels)).sum(0).tolist(), strict=True)),
        )


if __name__ == "__main__":
    main()
