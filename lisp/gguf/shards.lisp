;;;; shards.lisp - GGUF files split into shards as llama.cpp's gguf-split
;;;; writes them, and read back as one.
;;;;
;;;; A set of N shards is PREFIX-00001-of-0000N.gguf ... (five digits each,
;;;; llama.cpp's llama_split_path).  The first shard carries the whole
;;;; metadata of the model; every shard carries split.no (u16, its place
;;;; from 0), split.count (u16, N) and split.tensors.count (i32, the tensors
;;;; of the whole set), in that order, after its other keys, as gguf-split
;;;; leaves them.  The tensors keep their order: the first shard holds the
;;;; first ones.  Every shard lays its tensors out at the model's alignment;
;;;; the shards after the first carry general.alignment only when it is not
;;;; GGUF's default 32 (gguf-split never writes it there, and lays out at 32
;;;; whatever the key says: a file its own loader then misreads).
;;;;
;;;; GGUF:WRITE-SHARDS writes every shard under a temporary name first and
;;;; renames them all only when all are written, so a failure leaves no
;;;; partial set (and no shard of an older set replaced).  GGUF:READ with
;;;; :SHARDS T opens a whole set through its first shard; MERGE-SHARDS
;;;; writes the set back as one file, without the split keys, so a file
;;;; split and merged again is the same bytes.

(in-package "GGUF")

(defparameter *split-keys* '("split.no" "split.count" "split.tensors.count")
  "The keys llama.cpp's gguf-split adds to every shard.")

(defun without-split-keys (metadata)
  "METADATA, a list of (key type value), without the split keys (see
*SPLIT-KEYS*), in its order."
  (remove-if (lambda (key) (member key *split-keys* :test #'string=)) metadata :key #'first))

(defun split-metadata (index count tensors &key (as :gguf-split))
  "The split keys of shard INDEX (from 0) of COUNT in a set of TENSORS
tensors, as (key type value) entries in the order the tool AS leaves them:
:GGUF-SPLIT (llama-gguf-split: split.no, split.tensors.count, split.count,
the count set last) or :LLAMA-QUANTIZE (llama-quantize --keep-split:
split.no, split.count, split.tensors.count)."
  (let ((no `("split.no" :u16 ,index))
        (n `("split.count" :u16 ,count))
        (total `("split.tensors.count" :i32 ,tensors)))
    (ecase as
      (:gguf-split (list no total n))
      (:llama-quantize (list no n total)))))

(defun shard-tensors (f)
  "F's tensors by the shard that holds them: a list of (FILE . TENSOR-INFOS),
one per shard of the set F (opened with GGUF:READ :SHARDS T) in order, FILE
the object to read those tensors from by name (F itself for the first
shard); ((F . all its tensor infos)) for a file that is not a set."
  (check-file 'shard-tensors f)
  (cons (cons f (remove-if #'ti-file (gguf-file-tensors f)))
        (mapcar (lambda (shard) (cons shard (gguf-file-tensors shard)))
                (gguf-file-shards f))))

(defun shard-path (prefix index count)
  "The name of shard INDEX (from 0) of COUNT for PREFIX, as llama.cpp's
llama_split_path makes it: PREFIX-00001-of-00003.gguf for index 0 of 3."
  (format nil (formatter "~A-~5,'0D-of-~5,'0D.gguf") prefix (1+ index) count))

(defun shard-prefix (path index count)
  "The prefix PATH was named with as shard INDEX of COUNT, or NIL when its
name does not end as that shard's (llama.cpp's llama_split_prefix)."
  (let ((tail (shard-path "" index count)))
    (and (> (length path) (length tail))
         (string= tail path :start2 (- (length path) (length tail)))
         (subseq path 0 (- (length path) (length tail))))))

(defun split-value (f key type)
  "The value of F's split key KEY, checked to be of TYPE; NIL when absent."
  (multiple-value-bind (value found-type present) (value f key)
    (when (and present (not (eq found-type type)))
      (shard-error 'foreign-shard-error (path f) nil "~A: expected type ~(~A~) (as llama.cpp ~
writes it), found ~(~A~)" key type found-type))
    value))

(defun open-shard-set (first)
  "FIRST (a file object just read) with the tensors of the rest of its set
when it is the first shard of several; FIRST itself when it has no
split.count or a count of 0 or 1.  Closes what it opened on failure."
  (let ((count (split-value first "split.count" :u16))
        (no (split-value first "split.no" :u16))
        (expected (split-value first "split.tensors.count" :i32))
        (name (path first))
        (shards '())
        (ok nil))
    (when (or (null count) (<= count 1))
      (return-from open-shard-set first))
    (unwind-protect
         (progn
           (unless (eql no 0)
             (shard-error 'foreign-shard-error name nil "expected the first shard of the set ~
(split.no 0), found split.no ~A" no))
           (unless expected
             (shard-error 'shard-count-error name nil "expected split.tensors.count in the ~
first shard, found none"))
           (let ((prefix (shard-prefix name 0 count)))
             (unless prefix
               (shard-error 'foreign-shard-error name nil "expected a name ending in ~A for ~
the first of ~D shards, found ~A" (shard-path "" 0 count) count (file-namestring name)))
             (loop for i from 1 below count
                   for shard-name = (shard-path prefix i count)
                   do (unless (path-kind shard-name)
                        (shard-error 'missing-shard-error shard-name nil "expected shard ~D of ~D ~
of the set of ~A, found no such file" (1+ i) count name))
                      (let ((shard (read-one shard-name)))
                        (push shard shards)
                        (check-shard shard i count))))
           (setf shards (nreverse shards))
           (let ((infos (loop for shard in (cons first shards)
                              append (loop for info in (gguf-file-tensors shard)
                                           collect (if (eq shard first)
                                                       info
                                                       (let ((copy (copy-structure info)))
                                                         (setf (ti-file copy) shard)
                                                         copy))))))
             (check-tensor-counts (cons first shards) (length infos))
             (let ((seen (make-hash-table :test 'equal)))
               (dolist (info infos)
                 (when (gethash (ti-name info) seen)
                   (shard-error 'foreign-shard-error (path (or (ti-file info) first)) nil
                                "expected tensor names unique across the set, found ~S twice"
                                (ti-name info)))
                 (setf (gethash (ti-name info) seen) t)))
             (setf (gguf-file-tensors first) infos
                   (gguf-file-shards first) shards
                   (gguf-file-by-name first) nil
                   ok t)
             first))
      (unless ok
        (mapc #'close shards)))))

(defun check-tensor-counts (shards found)
  "Check the split.tensors.count of each of SHARDS (a set, first shard
first) against FOUND, the tensors they hold: when they all say the same
and it is wrong, the set is refused through its first shard; otherwise the
first shard whose count is not FOUND is the one named."
  (let ((counts (mapcar (lambda (shard) (split-value shard "split.tensors.count" :i32)) shards)))
    (if (every (lambda (c) (eql c (first counts))) counts)
        (unless (eql found (first counts))
          (shard-error 'shard-count-error (path (first shards)) nil "expected ~D tensors in the ~
~D shards (split.tensors.count), found ~D" (first counts) (length shards) found))
        (loop for shard in shards
              for c in counts
              unless (eql c found)
                do (shard-error 'shard-count-error (path shard) nil "expected split.tensors.count ~
~D (the tensors of the ~D shards), found ~:[none~;~:*~D~]" found (length shards) c)))))

(defun check-shard (shard index count)
  (let ((name (path shard))
        (no (split-value shard "split.no" :u16))
        (n (split-value shard "split.count" :u16)))
    (unless (eql no index)
      (shard-error 'foreign-shard-error name nil "expected shard ~D of ~D (split.no ~D), found ~
~:[no split.no~;split.no ~:*~D~]" (1+ index) count index no))
    (unless (eql n count)
      (shard-error 'shard-count-error name nil "expected split.count ~D as in the first shard, ~
found ~:[none~;~:*~D~]" count n))))

(defun padded (n alignment)
  "N rounded up to a multiple of ALIGNMENT: the bytes a tensor of N bytes
takes in a GGUF file's data section."
  (* alignment (ceiling n alignment)))

(defun split-plan (f &key max-tensors max-bytes)
  "F's tensors in groups, one per shard, as llama.cpp's gguf-split groups
them: at most MAX-TENSORS tensors per shard (128 when neither limit is
given), or shards whose tensor data (each tensor padded to the alignment)
stay within MAX-BYTES, a tensor larger than that alone in its shard.  A file
without tensors makes one group.  A plan that cannot be written signals
GGUF-ERROR naming F: more than 65535 shards (split.count is a u16) or more
than 2^31-1 tensors (split.tensors.count is an i32).  Linear in the
tensors; the one plan of both `split --dry-run' and the writing."
  (check-file 'split-plan f)
  (let ((groups '()) (group '()) (size 0) (count 0)
        (max-tensors (or max-tensors (and (null max-bytes) 128)))
        (tensors (length (gguf-file-tensors f))))
    (when (> tensors (1- (expt 2 31)))
      (gguf-error (path f) :shard-count nil "expected at most 2^31-1 tensors to split ~
(split.tensors.count is an i32), found ~D" tensors))
    (loop for info in (gguf-file-tensors f)
          for i from 0
          for bytes = (padded (ti-bytes info) (alignment f))
          do (when (and group
                        (if max-tensors
                            (zerop (mod i max-tensors))
                            (> (+ size bytes) max-bytes)))
               (push (nreverse group) groups)
               (incf count)
               (setf group '() size 0))
             (push info group)
             (incf size bytes))
    (push (nreverse group) groups)
    (incf count)
    (when (> count 65535)
      (gguf-error (path f) :shard-count nil "expected at most 65535 shards (split.count is a ~
u16), found ~D (~:[at most ~D bytes~;~:*at most ~D tensor~:P~*~] each)" count max-tensors max-bytes))
    (nreverse groups)))

(defun shard-file (f index count group)
  "The file object of shard INDEX of COUNT of F, holding the tensor infos
GROUP (a group of SPLIT-PLAN)."
  (let ((tensors (mapcar (lambda (info)
                           (let ((copy (copy-structure info)))
                             (unless (ti-data info)
                               (setf (ti-file copy) (or (ti-file info) f)))
                             copy))
                         group))
        (split (split-metadata index count (length (gguf-file-tensors f)))))
    (if (zerop index)
        (%make-gguf-file :alignment (alignment f)
                         :metadata (append (without-split-keys (gguf-file-metadata f)) split)
                         :implicit-alignment (gguf-file-implicit-alignment f)
                         :tensors tensors)
        (%make-gguf-file :alignment (alignment f)
                         :metadata (if (= 32 (alignment f))
                                       split
                                       (cons (list "general.alignment" :u32 (alignment f)) split))
                         :implicit-alignment (= 32 (alignment f))
                         :tensors tensors))))

(defun check-target (name)
  (let ((kind (path-kind name)))
    (when (and kind (not (eq kind :file)))
      (gguf-error name :not-regular nil "expected a regular file or no file as a shard's target, ~
found a ~(~A~)" kind))))

(defun write-staged (names writer)
  "Write a set of files at once, all or none: call WRITER with a temporary
path beside each of NAMES and its index in turn, then rename every
temporary file over its name together (see gguf/fileio.h): a failure or an
interrupt, while writing or while renaming, leaves every file under NAMES as
it was and no temporary file.  Targets that are not regular files are
refused first; a name that is a symbolic link is written through (the
file it names is replaced, the link stays).  Answers NAMES."
  (mapc #'check-target names)
  (let* ((files (loop for name in names
                      collect (multiple-value-bind (file message)
                                  (%resolve-target (path-octets name))
                                (or file (gguf-error name :write-failed nil "~A" message)))))
         (temps (loop for file in files
                      collect (temporary-name file "set"))))
    (multiple-value-bind (ok message) (%set-begin (mapcar #'path-octets temps))
      (unless ok
        (gguf-error (first names) :write-failed nil "~A" message)))
    (unwind-protect
         (progn
           (loop for temp in temps
                 for i from 0
                 do (funcall writer temp i))
           (multiple-value-bind (ok message)
               (%set-commit (mapcar #'path-octets files))
             (unless ok
               (gguf-error (first names) :write-failed nil "writing the set of ~D file~:P: ~A"
                           (length names) message)))
           names)
      (%set-end))))

(defun write-shards (prefix f &key max-tensors max-bytes)
  "Write the file object F as shards PREFIX-00001-of-0000N.gguf ... as
llama.cpp's gguf-split does, after SPLIT-PLAN (see it for MAX-TENSORS and
MAX-BYTES), all at once (WRITE-STAGED): a failure leaves none and signals
GGUF-ERROR.  Answers the list of shard paths."
  (check-file 'write-shards f)
  (let* ((groups (coerce (split-plan f :max-tensors max-tensors :max-bytes max-bytes) 'vector))
         (count (length groups)))
    (write-staged (loop for i below count collect (shard-path prefix i count))
                  (lambda (temp i) (write temp (shard-file f i count (aref groups i)))))))

(defun merge-shards (first out)
  "Write the shard set whose first shard is FIRST as the one GGUF file
OUT: the first shard's metadata without the split keys, then every
shard's tensors in order, bytes unchanged, at the first shard's
alignment.  Atomic as GGUF:WRITE.  Answers OUT."
  (with-file (f first)
    (let ((set (open-shard-set f)))
      (unless (split-value set "split.count" :u16)
        (shard-error 'foreign-shard-error (path set) nil "expected a shard (split.count), found ~
a file without the split keys"))
      (setf (gguf-file-metadata set) (without-split-keys (gguf-file-metadata set)))
      (write out set))))
