;;;; commands/tokenize.lisp - `rontolisp tokenize': its command line; the work
;;;; is in model/tokenizer.lisp.

(in-package "RONTOLISP")

(define-command "tokenize" (file &rest texts)
    (:usage "FILE (TEXT... | --file F) [--no-special] [--no-parse-special] [--json]"
     :summary "print the token ids of texts by a GGUF file's or a tokenizer.json's tokenizer"
     :details "FILE is a GGUF file (its tokenizer.ggml.* keys: model gpt2, byte-level BPE)
or a Hugging Face tokenizer.json (model BPE, pre-tokenizer ByteLevel).  Each
text is encoded as Hugging Face tokenizers encodes it: special and added
tokens found in the raw text first, NFC when the tokenizer says so, GPT-2's
pre-tokenizer expression, the byte-to-unicode table, then the merges; the
bos and eos tokens added as the tokenizer says.  Text form: one line per
text, the ids separated by spaces.  --json: one object per text and line,
{\"text\", \"ids\", \"pieces\"}.  --file F takes one text per line (read line by
line, so a file of any size streams; an empty file has no texts; - is
standard input, each answer written as its line arrives).  A text
that is not UTF-8 is an error naming the text (\"text 2\", or the file and
line) and the byte offset.  \"--\" ends the options, so a text may start
with a dash."
     :options ((text-file "--file F" :help "a file of texts, one per line (- standard input)")
               (no-special "--no-special" :help "add no bos/eos tokens")
               (no-parse-special "--no-parse-special"
                                 :help "treat special tokens in the text as plain text")
               (json "--json" :help "one JSON object per text (bytes that are not UTF-8 as \\udcHH)")))
  (when (and texts text-file)
    (usage-error "expected texts or --file, found both"))
  (unless (or texts text-file)
    (usage-error "expected at least one text or --file F, found neither"))
  (let ((tok (model:load-tokenizer file)))
    (flet ((one (octets where)
             (let ((ids (tokenize-octets tok octets (not no-special) (not no-parse-special) where)))
               (if json
                   (progn
                     (write-json (list :object (cons "text" (%utf8-string octets))
                                       (cons "ids" ids)
                                       (cons "pieces" (map 'vector (lambda (id) (model:token-piece tok id))
                                                           ids)))
                                 *standard-output*)
                     (terpri))
                   (write-ids-line ids *standard-output*)))))
      (if text-file
          (map-file-lines (lambda (octets number)
                            (one octets (format nil "~A line ~D" (lines-name text-file) number)))
                          text-file :dash-is-stdin t :flush *standard-output*)
          (loop for text in texts
                for i from 1
                do (one (check-text text tok 'model:tokenize) (format nil "text ~D" i))))))
  0)
