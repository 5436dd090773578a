;;;; test-gguf-py.lisp - llama.cpp's Python GGUF library (gguf-py, from the
;;;; source bundle tests/fetch-tokenizer-refs.sh unpacks into
;;;; build/cache/gguf-py/) on every kind of file rontolisp writes: its
;;;; gguf_new_metadata copies the file (it refuses an empty array, among
;;;; other things) and gguf_dump reads it.  The copy must hold the same
;;;; keys, values and tensor bytes.  Needs a python3 with numpy, tqdm and
;;;; yaml (Debian's python3-numpy, python3-tqdm, python3-yaml); without it or the bundle the
;;;; test skips (fails under CI=true).

(in-package "RONTOLISP-TESTS")

(def-suite gguf-py :in all
  :description "gguf-py's gguf_new_metadata and gguf_dump on the files we write.")
(in-suite gguf-py)

(defun gguf-py-script (name)
  "The path of gguf-py's script NAME (gguf_dump) in build/cache/gguf-py/, or
NIL when it was not fetched."
  (let ((p (merge-pathnames (format nil "build/cache/gguf-py/gguf/scripts/~A.py" name) *root*)))
    (and (probe-file p) (namestring p))))

(defun same-gguf-content-p (a b)
  "True when the GGUF files A and B hold the same metadata (keys, types,
values, in order) and the same tensors (names, types, dims, bytes)."
  (gguf:with-file (fa a)
    (gguf:with-file (fb b)
      (flet ((tensors (f)
               (mapcar (lambda (i)
                         (list (gguf:tensor-info-name i) (gguf:tensor-info-type i)
                               (gguf:tensor-info-dims i)
                               (gguf:tensor-octets f (gguf:tensor-info-name i))))
                       (gguf:tensor-infos f))))
        (and (equalp (gguf:metadata fa) (gguf:metadata fb))
             (equalp (tensors fa) (tensors fb)))))))

(defun write-every-kind (dir)
  "Write into DIR (a directory path ending in /) one file of every kind
rontolisp writes; answer ((what . path) ...)."
  (flet ((p (name) (concatenate 'string dir name))
         (run (&rest args)
           (multiple-value-bind (code out err) (run-exe args)
             (declare (ignore out))
             (unless (eql code 0)
               (error "rontolisp~{ ~A~} failed (~A): ~A" args code err)))))
    (let ((hf (p "hf")))
      (rontolisp:write-random-hf hf "s1-pico" :head :classifier)
      (run "convert" "--random" "s1-pico" (p "random.gguf"))
      (run "convert" hf (p "hf.gguf"))
      (run "convert" "--random" "s1-pico" (p "encoder.gguf") "--encoder-only")
      (run "convert" "--random" "s1-pico" (p "outliers.gguf") "--type" "q8_0" "--outlier-aware")
      (run "quantize" (p "random.gguf") (p "quantized.gguf") "q8_0")
      (run "edit" (p "random.gguf") (p "edited.gguf") "--set" "general.name=edited")
      (run "split" (p "random.gguf") (p "part") "--max-tensors" "20")
      (run "merge" (p "part-00001-of-00002.gguf") (p "merged.gguf"))
      (run "calibrate" (p "random.gguf") (p "calibration.gguf"))
      (loop for (what name) in '(("convert --random (Laya)" "random.gguf")
                                 ("convert of a Hugging Face classifier" "hf.gguf")
                                 ("convert --encoder-only" "encoder.gguf")
                                 ("convert --outlier-aware" "outliers.gguf")
                                 ("quantize" "quantized.gguf")
                                 ("edit" "edited.gguf")
                                 ("split, first shard" "part-00001-of-00002.gguf")
                                 ("split, last shard" "part-00002-of-00002.gguf")
                                 ("merge" "merged.gguf")
                                 ("calibrate" "calibration.gguf"))
            collect (cons what (p name))))))

(test gguf-py-copies-and-dumps-every-kind-of-file
  "gguf_new_metadata copies each kind of file we write to a file of the
same content, and gguf_dump reads it: no empty array (which gguf-py's
writer refuses), nothing its reader cannot read."
  (let ((new-metadata (gguf-py-script "gguf_new_metadata"))
        (dump (gguf-py-script "gguf_dump"))
        (python (gguf-py-python)))
    (cond
      ((not (and new-metadata dump))
       (skip-reference "gguf-py is missing (run sh tests/fetch-tokenizer-refs.sh)"))
      ((not python)
       (skip-reference "no python3 imports numpy, tqdm and yaml (install python3-numpy, python3-tqdm and python3-yaml)"))
      (t
       (let ((dir (format nil "~A/" (tmp-path "gguf-py"))))
         (unwind-protect
              (progn
                (ensure-directories-exist dir)
                (loop for (what . path) in (write-every-kind dir)
                      for copy = (concatenate 'string path ".copy.gguf")
                      do (multiple-value-bind (code out) (run-gguf-py python new-metadata path copy)
                           (is (eql 0 code) "gguf_new_metadata on ~A's file: exit ~A~%~A" what code out)
                           (when (eql 0 code)
                             (is (same-gguf-content-p path copy)
                                 "gguf_new_metadata's copy of ~A's file differs from it" what)))
                         (multiple-value-bind (code out) (run-gguf-py python dump path)
                           (is (eql 0 code) "gguf_dump on ~A's file: exit ~A~%~A" what code out))))
           (sh "rm -rf \"$1\"" dir)))))))
