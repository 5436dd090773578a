;;;; commands/embed.lisp - `rontolisp embed': its command line; the work
;;;; is in model/embed.lisp.

(in-package "COMMAND-LINE")

(define-command "embed" (file)
    (:usage "FILE.gguf (--tokens 2,17,9,3 | --tokens-file F | --text TEXT | --text-file F) [--pooling none|mean|cls|last] [--normalize N] [--activations q8|q8x2] [--gelu erf|tanh] [--json | --embd-output-format raw|array|json|json+] [--embd-separator SEP] [--npy FILE]"
     :summary "run a modern-bert encoder on token ids (or texts) and print its embeddings"
     :details "The encoder forward pass on each token sequence, as llama-embedding
runs it: one line of floats per token (pooling none) or one line per
sequence (mean, cls, last); the pooling is the file's
modern-bert.pooling_type unless --pooling says otherwise (none without the
key), and each line is scaled to unit Euclidean length unless --normalize
says otherwise (llama-embedding's --embd-normalize).  With --json, one JSON
object per sequence and line: file, tokens, pooling, normalize,
activations, index (the input's, from 0), text (null for token ids),
embeddings.  --embd-output-format array, json or json+ writes all the
embeddings at the end as llama-embedding does (json+ with the cosine
similarity of every pair), --npy FILE as a NumPy array as well; numbers
in the shortest form that reads back as the same float.  FILE may be the
first shard of a llama-gguf-split set.  A decision head in the file is ignored.  --tokens-file is UTF-8
text; one with no token id is an error, and so is an id the file's
vocabulary does not hold or a sequence longer than its context, naming the
file and the line.  --text and --text-file (one text per line, read line by
line; with --tokens-file, - is standard input and each answer is written as
its line arrives) are tokenized by the file's own tokenizer with its bos and eos tokens,
then embedded: the same numbers as --tokens with those ids; a text that is
not UTF-8 is an error naming --text or the file and line, and the byte
offset.  A NaN or infinity in the hidden states is an error naming the
layer and the step that made it."
     :options ((tokens "--tokens IDS" :help "one sequence: token ids separated by commas")
               (tokens-file "--tokens-file F"
                            :help "a file of sequences, one per line (ids separated by
commas or blanks)")
               (text "--text TEXT" :help "one text, tokenized by the file's tokenizer")
               (text-file "--text-file F" :help "a file of texts, one per line")
               (pooling "--pooling MODE" :parse (choice-parser '("none" "mean" "cls" "last")
                                                               :key #'option-keyword)
                        :help "none, mean, cls or last (default: the file's
modern-bert.pooling_type, none without it)")
               (normalize "--normalize N" :parse #'parse-normalize :default 2
                          :help "as llama-embedding's --embd-normalize: -1 or none,
0 or max-abs (largest magnitude 32760), 1 or taxicab, 2 or l2 (unit length,
the default), or a p-norm P above 2")
               (activations "--activations A" :parse (choice-parser '("q8" "q8x2")
                                                                    :key #'option-keyword)
                            :default :q8 :help "how Q8_0 weights see the activations:
q8 (default) or q8x2 (two-pass, about 15 bits)")
               (gelu "--gelu G" :parse (choice-parser '("erf" "tanh") :key #'option-keyword)
                     :default :erf :help "erf (exact, default) or tanh (llama.cpp's)")
               (json "--json" :help "one JSON object per sequence (bytes that are not UTF-8 as \\udcHH)")
               (output-format "--embd-output-format F"
                              :parse (choice-parser '("raw" "array" "json" "json+")
                                                    :key #'option-keyword)
                              :help "as llama-embedding's: raw (a line per row, the
default), array ([[...],...] on one line), json ({\"object\": \"list\",
\"data\": [...]}) or json+ (json and \"cosineSimilarity\"), written once
every input is embedded")
               (separator "--embd-separator SEP"
                          :help "with --text: split the text at each SEP into several
inputs, as llama-embedding splits its prompt (without it, the text is one
input)")
               (npy "--npy FILE" :help "also write every row to FILE as a NumPy .npy array,
float32, shape (rows, dimension)")))
  (unless (= 1 (count-if #'identity (list tokens tokens-file text text-file)))
    (usage-error "expected exactly one of --tokens, --tokens-file, --text and --text-file"))
  (when (and json output-format)
    (usage-error "--json and --embd-output-format each choose the output: give one"))
  (when (and separator (not text))
    (usage-error "--embd-separator splits --text, found no --text"))
  (when (equal separator "")
    (usage-error "--embd-separator expects a non-empty separator, found \"\""))
  (let* ((encoder (model:load file))
         (sequence (and tokens (parse-token-list tokens "--tokens" encoder)))
         (pooling (or pooling (file-pooling encoder)))
         (output (or output-format (if json :jsonl :raw)))
         (keep (or npy (member output '(:array :json :json+))))
         (kept (make-array 16 :adjustable t :fill-pointer 0))
         (inputs 0))
    (when (and tokens (null sequence))
      (usage-error "--tokens: expected at least one token id, found none"))
    (flet ((embed (ids text)
             ;; one input: its rows printed (raw, jsonl) or kept for the end
             (let ((rows (normalized-embeddings encoder ids pooling normalize activations gelu)))
               (case output
                 (:jsonl
                  (write-json (list :object (cons "file" file)
                                    (cons "tokens" (coerce ids 'vector))
                                    (cons "pooling" (string-downcase (symbol-name pooling)))
                                    (cons "normalize" normalize)
                                    (cons "activations" (string-downcase (symbol-name activations)))
                                    (cons "index" inputs)
                                    (cons "text" (or text :null))
                                    (cons "embeddings" rows))
                              *standard-output*)
                  (write-newline))
                 (:raw
                  (loop for row across rows
                        do (write-numbers row *standard-output*)
                           (write-newline))))
               (when keep
                 (loop for row across rows do (vector-push-extend row kept)))
               (incf inputs))))
      (cond (text
             (let ((tok (tokenizer-of encoder 'model:tokenize)))
               (dolist (part (if separator (split-at-separator text separator) (list text)))
                 (embed (coerce (tokenize-octets tok (check-text part tok 'model:tokenize) t t "--text")
                                'list)
                        part))))
            (text-file
             (let ((tok (tokenizer-of encoder 'model:tokenize)))
               (when (zerop (map-file-lines
                             (lambda (octets number)
                               (embed (coerce (tokenize-octets tok octets t t
                                                               (line-place text-file number))
                                              'list)
                                      (%utf8-string octets)))
                             text-file :dash-is-stdin t :flush *standard-output*))
                 (file-io-error (lines-name text-file)
                                "expected texts, one per line, found an empty file"))))
            (tokens-file (map-token-file (lambda (ids) (embed ids nil)) tokens-file encoder
                                         :flush *standard-output*))
            (t (embed sequence nil))))
    (when (member output '(:array :json :json+))
      (write-embeddings-document kept inputs output *standard-output*))
    (when npy
      (write-npy npy kept)))
  0)
