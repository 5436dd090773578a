;;;; test-json.lisp - the JSON reader: values, and the refusals it signals.

(in-package "RONTOLISP-TESTS")

(def-suite json :in all :description "The JSON reader.")
(in-suite json)

(test json-parse-values
  (let ((v (rontolisp:parse-json "{\"a\": [1, -2.5, true, false, null, \"\\u00e9\"], \"b\": {}}")))
    (is (hash-table-p v))
    (is (equalp #(1 -2.5d0 t nil :null "é") (gethash "a" v)))
    (is (hash-table-p (gethash "b" v))))
  (signals rontolisp:json-error (rontolisp:parse-json "{\"a\": }"))
  (signals rontolisp:json-error (rontolisp:parse-json "{\"a\": 1, \"a\": 2}"))
  (signals rontolisp:json-error (rontolisp:read-json-file "/nonexistent.json")))

(test json-refuses-numbers-beyond-its-range
  "A number a double or a 64-bit integer cannot hold is refused as JSON,
with the file, the byte and what was expected (the overflow trap once
escaped the reader as a bare FLOATING-POINT-OVERFLOW)."
  (flet ((refusal (thunk)
           (handler-case (progn (funcall thunk) nil)
             (rontolisp:json-error (c) (princ-to-string c))
             (error (c) (format nil "not a JSON-ERROR: ~A ~A" (type-of c) c)))))
    (let ((m (refusal (lambda () (rontolisp:parse-json "{\"norm_eps\": 1e999}")))))
      (is (and m (contains m "at byte 18") (contains m "expected a number of magnitude below 1.8e308")
               (contains m "1e999"))
          "~S" m))
    (let ((m (refusal (lambda () (rontolisp:parse-json "[-1e400]")))))
      (is (and m (contains m "below 1.8e308")) "~S" m))
    (let ((m (refusal (lambda () (rontolisp:parse-json "[123456789012345678901234567890]")))))
      (is (and m (contains m "expected an integer within 64 bits")) "~S" m))
    (let ((path (tmp-path "big.json")))
      (with-open-file (s path :direction :output :if-exists :supersede)
        (write-string "{\"a\": [1, 2e308]}" s))
      (let ((m (refusal (lambda () (rontolisp:read-json-file path)))))
        (is (and m (contains m path) (contains m "1.8e308")) "~S" m))
      (delete-file path)))
  ;; What a double holds, tiny or not, is read as it is.
  (is (eql 1d-50 (aref (rontolisp:parse-json "[1e-50]") 0)))
  (is (eql 0d0 (aref (rontolisp:parse-json "[1e-400]") 0))))

(test json-reads-back-the-lone-surrogate-escapes-it-writes
  "WRITE-JSON writes a byte that was not UTF-8 (the character U+DC80 to
U+DCFF of a Lisp string) as the lone surrogate escape \\udcHH; the reader
once refused them all, so our own output did not read back.  Now write then
read is the identity, keys included, beside private-use characters (which
the reader borrows a block of while it reads)."
  (let* ((bytes (coerce (list #\a (code-char #xdc80) (code-char #xdcff) #\b) 'string))
         (private (coerce (list (code-char #xe000) (code-char #xe080) (code-char #xf780)) 'string))
         (value (vector bytes private (concatenate 'string private bytes) "plain \"q\" \\")))
    (let* ((text (with-output-to-string (s)
                   (text::write-json (list :object (cons bytes value)) s)))
           (back (rontolisp:parse-json text)))
      (is (contains text "\\udc80\\udcff") "~A" text)
      (is (= 1 (hash-table-count back)))
      (is (equalp value (gethash bytes back)) "~S" text)))
  ;; a pair stays a pair, its low half in dc80..dcff or not
  (is (equal (coerce (list (code-char #x1f480) (code-char #xdc80)) 'string)
             (rontolisp:parse-json "\"\\ud83d\\udc80\\udc80\"")))
  ;; other lone surrogates stand for no character and no byte: refused, at
  ;; their position, in our words
  (dolist (text '("\"\\ud800\"" "\"\\udc00\"" "\"\\udd80\"" "[\"x\\ud800y\"]"))
    (let ((m (handler-case (progn (rontolisp:parse-json text) nil)
               (rontolisp:json-error (c) (princ-to-string c)))))
      (is (and m (contains m "found the lone surrogate")
               (contains m "byte escape \\udc80 to \\udcff"))
          "~S: ~S" text m))))

(test json-brief-writes-values-as-json
  "A value a message reports is written as the JSON it came from (never
Lisp's :NULL, 1.5d0 or #(#(...))), a long one cut short with \"...\"."
  (flet ((brief (text) (text::json-brief (rontolisp:parse-json text))))
    (is (string= "null" (brief "null")))
    (is (string= "1.5" (brief "1.5")))
    (is (string= "true" (brief "true")))
    (is (string= "false" (brief "false")))
    (is (string= "-7" (brief "-7")))
    (is (string= "\"a\\\"b\\n\"" (brief "\"a\\\"b\\n\"")))
    (is (string= "[[1, 2], [3]]" (brief "[[1, 2], [3]]")))
    (is (string= "[[[\"a\"]]]" (brief "[[[\"a\"]]]")))
    (is (string= "[]" (brief "[]")))
    (is (string= "{}" (brief "{}")))
    (is (string= "{\"a\": [null], \"text\": 1.5}" (brief "{\"text\": 1.5, \"a\": [null]}")))
    ;; long values are cut: a string, an array, an object, deep nesting
    (let ((s (brief (format nil "\"~A\"" (make-string 100000 :initial-element #\x)))))
      (is (< (length s) 80) "~A" s)
      (is (string= "\"xxxx" s :end2 5))
      (is (string= "...\"" s :start2 (- (length s) 4)) "~A" s))
    (let ((s (brief (format nil "[~{~D~^, ~}]" (loop for i below 10000 collect i)))))
      (is (< (length s) 80) "~A" s)
      (is (string= "[0, 1, 2, " s :end2 10))
      (is (string= ", ...]" s :start2 (- (length s) 6)) "~A" s))
    (let ((s (brief (format nil "{~{\"k~D\": 1~^, ~}}" (loop for i below 10000 collect i)))))
      (is (< (length s) 80) "~A" s)
      (is (string= ", ...}" s :start2 (- (length s) 6)) "~A" s))
    (let ((s (text::json-brief (let ((v 1)) (dotimes (k 100000 v) (setf v (vector v)))))))
      (is (< (length s) 200) "~A" s)
      (is (search "[[[[...]]]]" s) "~A" s))))

;;; Numbers written from C (write-numbers) against the Lisp printer.

(defun single-from-bits (bits)
  (rontolisp::%bits-single bits))

(defun printer-test-floats ()
  "Single-floats for comparing the printers: the edges (zeros, infinities,
NaNs, the largest and smallest normals and subnormals, every power of two,
the neighbours of 1e-3 and 1e7, ties between two shortest candidates), then
random bit patterns over every exponent and random subnormals."
  (let ((state (make-random-state t))
        (bits (list 0 #x80000000 #x7f800000 #xff800000 #x7fc00000 #xffc00001 #x7fc00001
                    #x7f7fffff #xff7fffff #x00800000 #x007fffff #x00000001 #x80000001
                    #x4a000001 #x4a000003 #x49800001 #x49800003)))
    (loop for e from 1 below 255
          do (push (ash e 23) bits)
             (push (1+ (ash e 23)) bits)
             (push (1- (ash e 23)) bits))
    (dolist (x '(1e-3 1e7 1e-4 1e6 0.1 0.3 100.0))
      (let ((b (command-line::%single-bits x)))
        (loop for d from -3 to 3 do (push (+ b d) bits))))
    (loop repeat 60000 do (push (random (expt 2 32) state) bits))
    (loop repeat 5000 do (push (logior (random 2 state) (ash (random (expt 2 23) state) 0)) bits)
                         (push (logior #x80000000 (random (expt 2 23) state)) bits))
    ;; a signalling NaN traps in Lisp arithmetic before any printer sees it
    (map '(simple-array single-float (*))
         (lambda (b) (single-from-bits (if (and (= (ldb (byte 8 23) b) 255) (plusp (ldb (byte 23 0) b)))
                                           (logior b #x400000)
                                           b)))
         bits)))

(defun split-at (char string)
  "The pieces of STRING between the characters CHAR."
  (loop with start = 0
        for at = (position char string :start start)
        collect (subseq string start at)
        while at
        do (setf start (1+ at))))

(test write-numbers-floats-are-the-lisp-printers-text
  ;; embed and decide printed each float through FORMAT and PRIN1; the C
  ;; printer must write the very same text (shortest digits, ties up, the
  ;; printer's notation, subnormals with the printer's extra digits).
  (let* ((floats (printer-test-floats))
         (text (split-at #\Space (with-output-to-string (s)
                                             (text::write-numbers floats s))))
         (json (split-at #\, (with-output-to-string (s)
                                          (text::write-numbers floats s :separator ","
                                                                             :json t))))
         (bad 0))
    (is (= (length floats) (length text) (length json)))
    (loop for x across floats for a in text for b in json
          unless (and (string= a (text::float-text x))
                      (string= b (text::json-float-string x)))
            do (when (< (incf bad) 10)
                 (fail "bits ~8,'0X: ~S and ~S, the printer ~S and ~S" (command-line::%single-bits x)
                       a b (text::float-text x) (text::json-float-string x))))
    (is (zerop bad) "~D of ~D floats differ" bad (length floats))
    ;; a JSON array of them is what the element-by-element writer made
    (is (string= (with-output-to-string (s) (text::write-json (coerce floats 'simple-vector) s))
                 (with-output-to-string (s) (text::write-json floats s))))
    (is (string= (with-output-to-string (s) (text::write-json (coerce floats 'simple-vector) s
                                                                  :indent 2))
                 (with-output-to-string (s) (text::write-json floats s :indent 2))))))

(test write-numbers-integers-are-decimal
  (let* ((state (make-random-state t))
         (values (append (list 0 1 -1 9 10 99 100 most-positive-fixnum most-negative-fixnum)
                         (loop repeat 5000 collect (- (random (expt 2 40) state) (expt 2 39)))))
         (fixnums (coerce values '(simple-array fixnum (*))))
         (small (coerce (list 0 -1 2147483647 -2147483648 50256) '(simple-array (signed-byte 32) (*))))
         (expected (format nil "~{~D~^ ~}" values)))
    (is (string= expected (with-output-to-string (s) (text::write-numbers fixnums s))))
    (is (string= "0 -1 2147483647 -2147483648 50256"
                 (with-output-to-string (s) (text::write-numbers small s))))
    (is (string= (format nil "[~{~D~^,~}]" values)
                 (with-output-to-string (s) (text::write-json fixnums s))))))
