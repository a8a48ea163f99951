"""The report of an ``augcse cluster`` run (``clusters.md`` / ``clusters.html``): the verdict as its first line,
the cluster sizes before and after, each cluster's top words and three representative texts, a map of the
embeddings before and after, the stopping rule's trace and, with ``--peers``, the peer pipelines' clusterings.
Reads the record the command wrote and the texts, embeddings and soft assignments it holds; no label.

Top words are c-TF-IDF (BERTopic's class-based TF-IDF, Grootendorst 2022): the texts of each cluster joined
into one document, word counts t_{c,w} L1-normalised per cluster, weighted by log(1 + A / f_w), with A the
average number of words per cluster (rounded down) and f_w the count of w over all clusters. BERTopic's
``ClassTfidfTransformer`` computes it when bertopic is installed; otherwise :func:`class_tfidf` does, with the
same formula, on scikit-learn's ``CountVectorizer`` counts (English stop words removed in both).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from augcse.core.document import Document, Heading, Image, Paragraph, Table

TOP_WORDS = 8
REPRESENTATIVE = 3
MAP = "clusters-map.png"


def class_tfidf(counts) -> np.ndarray:
    """c-TF-IDF of a (clusters, words) count matrix: per-cluster frequencies times log(1 + A / f_w)."""
    counts = np.asarray(counts.todense() if hasattr(counts, "todense") else counts, dtype=np.float64)
    frequency = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    per_word = np.maximum(counts.sum(axis=0), 1)
    average = int(counts.sum(axis=1).mean())  # rounded down, as BERTopic does
    return frequency * np.log(1 + average / per_word)


def _weights(counts) -> np.ndarray:
    try:
        from bertopic.vectorizers import ClassTfidfTransformer
    except ImportError:
        return class_tfidf(counts)
    return np.asarray(ClassTfidfTransformer().fit_transform(counts).todense())


def top_words(texts: Sequence[str], labels: Sequence[int], clusters: int, count: int = TOP_WORDS) -> list[list[str]]:
    """Each cluster's ``count`` words of highest c-TF-IDF (none for an empty cluster)."""
    from sklearn.feature_extraction.text import CountVectorizer

    documents = [" ".join(t for t, c in zip(texts, labels) if c == k) for k in range(clusters)]
    vectorizer = CountVectorizer(stop_words="english")
    try:
        counts = vectorizer.fit_transform(documents)
    except ValueError:  # no word left (every text is stop words or punctuation)
        return [[] for _ in range(clusters)]
    weights, vocabulary = _weights(counts), vectorizer.get_feature_names_out()
    return [[vocabulary[i] for i in np.argsort(-row)[:count] if row[i] > 0] for row in weights]


def representative(texts: Sequence[str], q: np.ndarray, clusters: int, count: int = REPRESENTATIVE) -> list[list[str]]:
    """Each cluster's ``count`` texts assigned to it with the highest confidence (max q)."""
    labels, confidence = q.argmax(1), q.max(1)
    out = []
    for k in range(clusters):
        members = np.flatnonzero(labels == k)
        out.append([texts[i] for i in members[np.argsort(-confidence[members], kind="stable")][:count]])
    return out


def plot_maps(before: np.ndarray, after: np.ndarray, labels: np.ndarray, path: Path) -> Path:
    """Two PCA maps (each fitted on its own embeddings), points coloured by the final cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, embeddings, title in zip(axes, (before, after), ("starting model", "kept model")):
        points = PCA(n_components=2, random_state=0).fit_transform(embeddings)
        ax.scatter(points[:, 0], points[:, 1], c=labels, cmap="tab20", s=6)
        ax.set_title(f"{title} (PCA)", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _short(text: str, width: int = 100) -> str:
    text = " ".join(text.split()).replace("|", "/")
    return text if len(text) <= width else text[: width - 1] + "…"


def _trace_rows(trace: Sequence[dict[str, Any]]) -> list[list[str]]:
    def number(value, form):
        return "—" if value is None else format(value, form)

    return [[str(c["step"]), number(c["measures"]["changed"], ".2%"), number(c["measures"]["largest_share"], ".0%"),
             str(c["measures"]["empty"]), number(c["measures"]["loss"], ".4f"),
             number(c["measures"]["loss_change"], ".2%"), c["reason"] or "go on"] for c in trace]


def write_report(record: dict[str, Any], texts: Sequence[str], run_dir: Path) -> tuple[Path, Path]:
    """Write ``clusters.md``, ``clusters.html`` and the map into ``run_dir``; the first line is the verdict."""
    clusters, q = record["clusters"], record["q_after"]
    labels = q.argmax(1)
    words = top_words(texts, labels, clusters)
    examples = representative(texts, q, clusters)
    rows = [[str(k), str(record["sizes_before"][k]), str(record["sizes_after"][k]), ", ".join(words[k]) or "—",
             " · ".join(_short(t) for t in examples[k]) or "—"] for k in range(clusters)]
    rule = record["rule"]
    doc = Document(record["verdict"]).add(
        Paragraph(f"{record['texts']} texts of {record['texts_file']} (column `{record['column']}`, sha256 "
                  f"{record['sha256'][:12]}…), K = {clusters}, {record['method']} on {record['model']}; "
                  f"{record['steps']} steps; stopped by {record['stopping_reason']}; kept {record['kept']}."
                  + (f" {record['skipped_empty']} empty rows were skipped." if record["skipped_empty"] else "")),
        Heading("Clusters"),
        Paragraph("Sizes under the starting model (K-means centroids on its embeddings) and under the kept model "
                  "(argmax of the soft assignment q); top words by c-TF-IDF; the texts assigned with the highest "
                  "confidence."),
        Table(["cluster", "before", "after", "top words", "representative texts"], rows, align_right=False),
        Image(plot_maps(record["embeddings_before"], record["embeddings_after"], labels, run_dir / MAP).resolve(),
              "embeddings before and after, PCA to 2 dimensions, coloured by the final cluster"),
        Heading("Stopping rule"),
        Paragraph(f"Checked at every checkpoint on {rule['checked_texts']} texts: stop when fewer than "
                  f"{rule['min_change']:.0%} changed cluster or the clustering loss moved by less than "
                  f"{rule['plateau']:.0%}; keep the starting model when the largest cluster holds more than "
                  f"{rule['max_share']:.0%} of the texts or more than {rule['max_empty']:.0%} of the clusters are "
                  "empty, and that is worse than at the start. No label is read."),
        Table(["step", "changed", "largest", "empty", "loss", "loss change", "decision"], _trace_rows(record["trace"])),
    )
    if record.get("peers"):
        doc.add(Heading("Peers"),
                Paragraph("The same texts clustered by the pipelines people run on embeddings (K-means; UMAP to 5 "
                          "dimensions, then K-means; BERTopic's UMAP + HDBSCAN, its noise one more cluster), on the "
                          "starting and on the kept model's embeddings; means over 3 seeds. Agreement with this "
                          "command's clusters is NMI. Without labels none of these says which clustering is right."),
                Table(["model", "pipeline", "clusters", "largest", "NMI with ours"],
                      [[p["model"], p["pipeline"], f"{p['clusters']:g}", f"{p['largest_share']:.0%}",
                        f"{p['nmi_with_ours']:.3f}"] for p in record["peers"]]))
    return doc.write(run_dir, "clusters")
