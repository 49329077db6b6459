"""A channel's files as an xgboost DMatrix, as the container reads them (data_utils.py): every file
of the channel folder and its subfolders (3 levels deep at most, deeper ones are left out with a
warning); the label in the first column (csv: the second column is the instance weight when
`csv_weights=1`; libsvm: `<label>[:<weight>] <index>:<value> ...`; parquet: the table's first column).

Differences: xgboost 3 no longer reads text files itself (the container handed csv and libsvm
paths to xgboost 1.x's parser), so they are parsed here; a csv header row, a ragged csv line or a
non-numeric value is one UserError naming the file and line (xgboost 1.x's parser read them as
data or stopped with a C++ error); parquet needs pyarrow (`pip install 'sdlocal[xgboost-algorithm]'`).
"""
from __future__ import annotations

import csv
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import xgboost as xgb

from sdlocal.hook.algorithms.errors import UserError
from sdlocal.hook.algorithms.xgboost_request import CSV, LIBSVM, PARQUET

logger = logging.getLogger(__name__)
MAX_FOLDER_DEPTH = 3


def data_files(path: Path) -> list[Path]:
    """The files of a channel (a file, or a folder walked in name order); [] when it has none."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    files: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        for entry in sorted(folder.iterdir()):
            if entry.name.startswith("."):
                raise UserError(f"Hidden file found in the data path! Remove that before training. ({entry})")
            if entry.is_dir():
                if depth >= MAX_FOLDER_DEPTH:
                    logger.warning("The depth of folder %s exceed the limit %d. Files in deeper sub dirs won't be "
                                   "loaded. Please adjust the folder structure accordingly.", path, MAX_FOLDER_DEPTH)
                    continue
                walk(entry, depth + 1)
            elif entry.is_file():
                files.append(entry)

    walk(path, 1)
    return files


def _first_line(path: Path) -> str:
    with path.open(errors="ignore") as f:
        return f.readline()


def _delimiter(path: Path) -> str:
    line = _first_line(path)
    try:
        delimiter = csv.Sniffer().sniff(line).delimiter
    except csv.Error as e:
        raise UserError(f"Could not determine delimiter on line {line[:50].rstrip()!r} of {path.name}: {e}") from None
    logger.info("Determined delimiter of CSV input is '%s'", delimiter)
    return delimiter


def _float(token: str, path: Path, line_no: int) -> float:
    token = token.strip()
    if not token:
        return np.nan  # an empty field is a missing value
    try:
        return float(token)
    except ValueError:
        what = "a header row" if line_no == 1 else "not a number"
        raise UserError(f"CSV file {path.name}, line {line_no}: {token[:40]!r} is {what}; the algorithm reads "
                        "numbers only, label first, no header (text/csv)") from None


def _read_csv(path: Path, delimiter: str) -> np.ndarray:
    rows: list[list[float]] = []
    width = None
    with path.open(errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = [_float(t, path, line_no) for t in line.rstrip("\r\n").split(delimiter)]
            if width is None:
                width = len(row)
            elif len(row) != width:
                raise UserError(f"CSV file {path.name}, line {line_no}: {len(row)} columns where the file's first "
                                f"line has {width}")
            rows.append(row)
    return np.array(rows, dtype=np.float32).reshape(len(rows), width or 0)


def _csv_dmatrix(files: list[Path], csv_weights: int) -> xgb.DMatrix:
    delimiter = _delimiter(files[0])
    tables = [t for t in (_read_csv(f, delimiter) for f in files) if t.size]
    widths = {t.shape[1] for t in tables}
    if len(widths) > 1:
        raise UserError(f"CSV files of one channel have different numbers of columns: {sorted(widths)}")
    table = np.vstack(tables) if tables else np.zeros((0, 1), dtype=np.float32)
    first = 2 if csv_weights == 1 else 1
    weight = table[:, 1] if csv_weights == 1 else None
    return xgb.DMatrix(table[:, first:], label=table[:, 0], weight=weight)


def _libsvm_lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    with path.open(errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            parts = line.split("#", 1)[0].split()
            if parts:
                yield line_no, parts


def _libsvm_dmatrix(files: list[Path], width: int | None = None) -> xgb.DMatrix:
    import scipy.sparse

    labels: list[float] = []
    weights: list[float] = []
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for path in files:
        for line_no, parts in _libsvm_lines(path):
            try:
                label, _, weight = parts[0].partition(":")
                labels.append(float(label))
                weights.append(float(weight) if weight else 1.0)
                for item in parts[1:]:
                    index, value = item.split(":")
                    rows.append(len(labels) - 1)
                    cols.append(int(index))
                    vals.append(float(value))
            except ValueError:
                raise UserError(f"First line '{' '.join(parts)[:50]}...' of file '{path.name}' is not 'LIBSVM' format. "
                                f"Please ensure the file is in 'LIBSVM' format. (line {line_no})") from None
    n_cols = max(width or 0, max(cols) + 1 if cols else 0)
    matrix = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(len(labels), n_cols), dtype=np.float32)
    weight_arr = np.array(weights) if any(w != 1.0 for w in weights) else None
    return xgb.DMatrix(matrix, label=np.array(labels), weight=weight_arr)


def _parquet_dmatrix(files: list[Path]) -> xgb.DMatrix:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("reading parquet needs pyarrow: pip install 'sdlocal[xgboost-algorithm]'") from None
    try:
        tables = [pq.read_table(str(f)) for f in files]
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        columns = [table.column(i).cast(pa.float64()).to_numpy() for i in range(table.num_columns)]
    except (pa.ArrowException, OSError) as e:
        raise UserError(f"Failed to load parquet data with exception: {e}") from None
    data = np.column_stack(columns) if columns else np.zeros((0, 1))
    return xgb.DMatrix(data[:, 1:], label=data[:, 0])


def load_channel(path: Path, content_type: str, csv_weights: int = 0, width: int | None = None
                 ) -> xgb.DMatrix | None:
    """The channel's data as a DMatrix; None when the channel has no data file. `width`: libsvm
    data gets at least that many columns (the validation data, as wide as the training data)."""
    files = data_files(path)
    if not files:
        return None
    if content_type == CSV:
        dmatrix = _csv_dmatrix(files, csv_weights)
    elif content_type == LIBSVM:
        dmatrix = _libsvm_dmatrix(files, width)
    elif content_type == PARQUET:
        dmatrix = _parquet_dmatrix(files)
    else:
        raise UserError(f"content type {content_type} is not read by sdlocal's XGBoost algorithm")
    if dmatrix.num_row() == 0 or dmatrix.get_label().size == 0:
        raise UserError(f"Got input data without labels. Please check the input data set. ({path})")
    return dmatrix


def same_width(train: xgb.DMatrix, other: xgb.DMatrix | None) -> None:
    """libsvm files of two channels may end at different feature indices: a clear error when the
    data sets disagree (xgboost 1.x: `feature_names mismatch`)."""
    if other is not None and other.num_col() > train.num_col():
        raise UserError(f"feature_names mismatch: the validation data has {other.num_col()} columns, the training "
                        f"data {train.num_col()}")


def channel_path(name: str, input_dir: Path) -> Path:
    """SM_CHANNEL_<NAME> (the toolkit's variable), else <input dir>/data/<name>."""
    return Path(os.environ.get(f"SM_CHANNEL_{name.upper()}", str(input_dir / "data" / name)))
