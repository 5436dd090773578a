;;;; commands/tokenize.lisp - `rontolisp tokenize' and `rontolisp
;;;; detokenize': their command lines; the work is in model/tokenizer.lisp.

(in-package "COMMAND-LINE")

(define-command "tokenize" (file &rest texts)
    (:usage "FILE (TEXT... | --file F) [--no-special] [--no-parse-special] [--ids | --json] [--show-count]"
     :summary "print the token ids of texts by a GGUF file's or a tokenizer.json's tokenizer"
     :details "FILE is a GGUF file (its tokenizer.ggml.* keys: model gpt2, byte-level BPE)
or a Hugging Face tokenizer.json (model BPE, pre-tokenizer ByteLevel).  Each
text is encoded as Hugging Face tokenizers encodes it: special and added
tokens found in the raw text first, NFC when the tokenizer says so, GPT-2's
pre-tokenizer expression, the byte-to-unicode table, then the merges; the
bos and eos tokens added as the tokenizer says.  Text form: one line per
text, the ids separated by spaces.  --ids: llama-tokenize's form, [1, 2, 3].
--json: one object per text and line, {\"text\", \"ids\", \"pieces\",
\"offsets\"}: offsets are, per token, [start, end] byte offsets into the
text's UTF-8 (Hugging Face's offsets, counted in bytes; [0, 0] for the bos
and eos tokens added).  --show-count: after each text, the line \"Total
number of tokens: N\" (in --json, a member \"count\").  --file F takes one
text per line (read line by line, so a file of any size streams; an empty
file has no texts; - is standard input, each answer written as its line
arrives).  A text that is not UTF-8 is an error naming the text
(\"text 2\", or the file and line) and the byte offset.  \"--\" ends the
options, so a text may start with a dash."
     :options ((text-file "--file F" :help "a file of texts, one per line (- standard input)")
               (no-special "--no-special" :help "add no bos/eos tokens")
               (no-parse-special "--no-parse-special"
                                 :help "treat special tokens in the text as plain text")
               (bracketed "--ids" :help "print the ids as llama-tokenize --ids does: [1, 2, 3]")
               (json "--json" :help "one JSON object per text: ids, pieces, byte offsets
(bytes that are not UTF-8 as \\udcHH)")
               (show-count "--show-count" :help "print the number of tokens of each text")))
  (when (and texts text-file)
    (usage-error "expected texts or --file, found both"))
  (unless (or texts text-file)
    (usage-error "expected at least one text or --file F, found neither"))
  (when (and json bracketed)
    (usage-error "expected --ids or --json, found both"))
  (let ((tok (model:load-tokenizer file)))
    (flet ((one (octets where)
             (multiple-value-bind (ids offsets)
                 (tokenize-octets tok octets (not no-special) (not no-parse-special) where json)
               (cond (json
                      (write-tokens-json tok octets ids offsets (and show-count (length ids))
                                         *standard-output*))
                     (bracketed
                      (write-char #\[)
                      (write-numbers ids *standard-output* :separator ", ")
                      (write-string "]")
                      (write-newline))
                     (t (write-ids-line ids *standard-output*)))
               (when (and show-count (not json))
                 ;; no FORMAT per line: it took half the time of --show-count
                 (write-string "Total number of tokens: ")
                 (write-numbers (make-array 1 :element-type 'fixnum :initial-element (length ids))
                                *standard-output*)
                 (write-newline)))))
      (if text-file
          (map-file-lines (lambda (octets number)
                            (one octets (line-place text-file number)))
                          text-file :dash-is-stdin t :flush *standard-output*)
          (loop for text in texts
                for i from 1
                do (one (check-text text tok 'model:tokenize) (format nil "text ~D" i))))))
  0)

(document-functions
  model:tokenizer-handle "The C tokenizer (prims/tokenizer.h) of a tokenizer from
MODEL:LOAD-TOKENIZER, for a primitive that reads it directly.")

(defun write-tokens-json (tok octets ids offsets count stream)
  "Write to STREAM the line of `tokenize --json', a JSON object and a
newline, for the text OCTETS, its IDS and OFFSETS as TOKENIZE-OCTETS
answers them, with the member \"count\" COUNT unless it is NIL: the bytes
WRITE-JSON and WRITE-NEWLINE write for the object of those values (the
tokenizer suite holds the two together), built in C in one buffer and
written at once (WRITE-JSON's string per piece, array per offset pair and
write per piece took ten times this)."
  (%write-tokens-json (tokenizer-handle tok) octets ids offsets count stream))

(defun parse-token-ids (words)
  "The token ids written in WORDS (command-line arguments): integers
separated by spaces or commas, in brackets or not, so \"1 2 3\", \"1,2,3\"
and \"[1, 2, 3]\" (llama-tokenize --ids, a Python list) are all read.  A
word that is not one signals USAGE-ERROR naming it."
  (loop for word in words
        for argument from 1
        nconc (let ((trimmed (string-trim " []" word)))
                (loop for start = 0 then (1+ end)
                      for end = (position-if (lambda (c) (member c '(#\, #\Space #\Tab))) trimmed
                                             :start start)
                      for part = (subseq trimmed start end)
                      unless (zerop (length part))
                        collect (if (and (every #'digit-char-p part) (<= (length part) 10))
                                    (parse-integer part)
                                    (usage-error "ids argument ~D: expected token ids (integers from 0, ~
separated by spaces or commas), found ~S" argument part))
                      while end))))

(define-command "detokenize" (file &rest ids)
    (:usage "FILE IDS..."
     :summary "print the text of token ids by a GGUF file's or a tokenizer.json's tokenizer"
     :details "FILE is what `rontolisp tokenize' takes.  IDS are token ids, each an
argument or several in one, separated by spaces or commas, in brackets or
not: \"1 2 3\" and \"[1, 2, 3]\" (what tokenize --ids prints) both work.
Prints their text and a newline: each token's bytes back through GPT-2's
byte table, special tokens as their text (Hugging Face's decode with the
special tokens kept); bytes that do not form UTF-8 are printed as U+FFFD.
An id outside the vocabulary is an error naming it and its position."
     :options ())
  (let ((ids (parse-token-ids ids)))
    (unless ids
      (usage-error "expected at least one token id, found none"))
    (write-line (model:detokenize (model:load-tokenizer file) ids)))
  0)
