r"""MALLET's reading of an exported state, and its TopicModelDiagnostics, transcribed loop by loop
from MALLET's Java (cc.mallet.classify.tui.Csv2Vectors, ParallelTopicModel.initializeFromState and
buildInitialTypeTopicCounts, TopicModelDiagnostics, IDSorter): slow, obvious references for the
tests, where MALLET itself (Java) is not installed.

`read_state` imports state_instances.txt as

    bin/mallet import-file --input state_instances.txt --output state.mallet --keep-sequence
        --preserve-case --token-regex '\S+' --line-regex '^(\S*)\t(.*)$' --name 1 --label 0 --data 2

does (Java's \S is not whitespace in ASCII: [^ \t\n\x0B\f\r]; the alphabet numbers words by first
appearance), then walks state.gz as initializeFromState does, refusing a line whose typeindex is
not the token's type with MALLET's message.
"""

import gzip
import math
import re

JAVA_NON_SPACE = "[^ \t\n\x0b\f\r]"
LINE = re.compile(rf"^({JAVA_NON_SPACE}*)\t(.*)$")
TOKEN = re.compile(rf"{JAVA_NON_SPACE}+")
PROPORTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)


class StateMismatch(Exception):
    pass


def read_state(instances_path, state_path):
    """(alphabet: words by type index, documents: [(names, types, topics)], alpha list, beta)."""
    index: dict[str, int] = {}
    documents = []
    with open(instances_path, encoding="utf-8", newline="") as f:
        for line in f.read().split("\n")[:-1]:
            match = LINE.match(line)
            assert match is not None, f"Line does not match regex: {line!r}"
            types = [index.setdefault(token, len(index)) for token in TOKEN.findall(match.group(2))]
            documents.append((match.group(1), types))
    alpha, beta = None, None
    with gzip.open(state_path, "rt", encoding="utf-8", newline="") as f:
        line = f.readline().rstrip("\n")
        while line.startswith("#"):
            if line.startswith("#alpha : "):
                alpha = [float(a) for a in line[len("#alpha : "):].split(" ") if a]
            elif line.startswith("#beta : "):
                beta = float(line[len("#beta : "):])
            line = f.readline().rstrip("\n")
        fields = line.split(" ")
        read = []
        for name, types in documents:
            topics = []
            for t in types:
                if t != int(fields[3]):
                    raise StateMismatch("instance list and state do not match: " + line)
                topics.append(int(fields[5]))
                line = f.readline().rstrip("\n")
                fields = line.split(" ") if line else fields
            read.append((name, types, topics))
    alphabet = [None] * len(index)
    for word, t in index.items():
        alphabet[t] = word
    return alphabet, read, alpha, beta


def topic_model_diagnostics(alphabet, documents, alpha, beta, n_top):
    """TopicModelDiagnostics(model, n_top) of the model MALLET builds from the state:
    {topic: (scores in MALLET's order, [word scores])}."""
    K, V = len(alpha), len(alphabet)
    alpha_sum, beta_sum = sum(alpha), beta * V
    type_topic = [dict() for _ in range(V)]
    tokens_per_topic = [0] * K
    for _, types, topics in documents:
        for t, k in zip(types, topics):
            type_topic[t][k] = type_topic[t].get(k, 0) + 1
            tokens_per_topic[k] += 1
    # getSortedWords: a TreeSet of IDSorter(type, count): larger count first, then the larger type
    sorted_words = [sorted(((t, c) for t in range(V) for k2, c in type_topic[t].items() if k2 == k),
                           key=lambda p: (-p[1], -p[0])) for k in range(K)]
    top = [[t for t, _ in sorted_words[k][:n_top]] for k in range(K)]
    in_order = [top[k] + [0] * (n_top - len(top[k])) for k in range(K)]  # int[] slots left at type 0
    codoc = [[[0] * n_top for _ in range(n_top)] for _ in range(K)]
    word_type_counts, n_tokens = [0] * V, 0
    rank1, nonzero = [0] * K, [0] * K
    at = [[0] * len(PROPORTIONS) for _ in range(K)]
    c_log_c = [0.0] * K
    for _, types, topics in documents:
        topic_counts = [0] * K
        present = [set() for _ in range(K)]
        for t, k in zip(types, topics):
            n_tokens += 1
            word_type_counts[t] += 1
            topic_counts[k] += 1
            if t in top[k]:
                present[k].add(t)
        if not types:
            continue
        max_topic, max_count = -1, -1
        for k in range(K):
            if topic_counts[k] > 0:
                nonzero[k] += 1
                if topic_counts[k] > max_count:
                    max_topic, max_count = k, topic_counts[k]
                c_log_c[k] += topic_counts[k] * math.log(topic_counts[k])
                share = (alpha[k] + topic_counts[k]) / (alpha_sum + len(types))
                for j, threshold in enumerate(PROPORTIONS):
                    if share < threshold:
                        break
                    at[k][j] += 1
                for a in range(n_top):
                    if in_order[k][a] in present[k]:
                        for b in range(a, n_top):
                            if a == b:
                                codoc[k][a][a] += 1
                            elif in_order[k][b] in present[k]:
                                codoc[k][a][b] += 1
                                codoc[k][b][a] += 1
        if max_topic > -1:
            rank1[max_topic] += 1
    sum_default = sum(beta / (beta_sum + tokens_per_topic[k]) for k in range(K))
    result = {}
    for k in range(K):
        T, limit = tokens_per_topic[k], len(top[k])
        counts = [c for _, c in sorted_words[k][:n_top]] + [0] * (n_top - limit)
        lengths = [len(alphabet[t].encode("utf-16-le")) // 2 for t in top[k]]
        scores = {"tokens": T, "document_entropy": -c_log_c[k] / T + math.log(T),
                  "word-length": sum(lengths) / n_top}
        coherence, coherence_words = 0.0, []
        for r in range(n_top):
            row, low = 0.0, 0.0
            for c in range(r):
                s = math.log((codoc[k][r][c] + beta) / (codoc[k][c][c] + beta))
                row += s
                low = min(low, s)
            coherence += row
            coherence_words.append(low)
        scores["coherence"] = coherence
        scores["uniform_dist"] = sum((c / T) * math.log(c * V / T) for _, c in sorted_words[k])
        scores["corpus_dist"] = sum((c / T) * math.log(n_tokens / T * c / word_type_counts[t])
                                    for t, c in sorted_words[k])
        scores["eff_num_words"] = 1 / sum((c / T) ** 2 for _, c in sorted_words[k])
        docs = [codoc[k][r][r] if r < limit else 0 for r in range(n_top)]
        diff_words = []
        for r in range(n_top):
            p, q = counts[r] / sum(counts), docs[r] / sum(docs)
            m = 0.5 * (p + q)
            diff_words.append((0.5 * p * math.log(p / m) if p > 0 else 0) + (0.5 * q * math.log(q / m) if q > 0 else 0))
        scores["token-doc-diff"] = sum(diff_words)
        scores["rank_1_docs"] = rank1[k] / nonzero[k]
        scores["allocation_ratio"] = at[k][6] / at[k][1] if at[k][1] else math.nan
        scores["allocation_count"] = at[k][5] / nonzero[k]
        exclusive = []
        for t, c in sorted_words[k][:n_top]:
            total = sum_default + sum(other / (beta_sum + tokens_per_topic[j]) for j, other in type_topic[t].items())
            exclusive.append(((beta + c) / (beta_sum + T)) / total)
        scores["exclusivity"] = sum(exclusive) / n_top
        word_scores = [{"rank": r + 1, "count": counts[r], "prob": counts[r] / T, "docs": docs[r],
                        "word-length": lengths[r], "coherence": coherence_words[r],
                        "uniform_dist": (counts[r] / T) * math.log(counts[r] * V / T),
                        "corpus_dist": (counts[r] / T) * math.log(n_tokens / T * counts[r]
                                                                  / word_type_counts[top[k][r]]),
                        "token-doc-diff": diff_words[r], "exclusivity": exclusive[r], "word": alphabet[top[k][r]]}
                       for r in range(limit)]
        result[k] = (scores, word_scores)
    return result
