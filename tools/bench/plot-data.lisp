;;;; plot-data.lisp - turns the JSON of `rontolisp bench --json' into what
;;;; tools/bench/plot.gp draws: one gnuplot data block per kernel
;;;; configuration (matrix values, weight GB/s, matrix name), and a file of
;;;; gnuplot variables holding the probe's read bandwidth.  `make bench'
;;;; runs it as
;;;;   build/rontolisp script tools/bench/plot-data.lisp BENCH.json OUT.dat OUT-vars.gp

(defun field (object key)
  "KEY of the JSON object OBJECT, NIL for null or absent."
  (let ((v (gethash key object)))
    (if (eq v :null) nil v)))

(destructuring-bind (json-path dat-path vars-path) rontolisp:*args*
  (let* ((json (rontolisp:read-json-file json-path))
         (matrices (coerce (field json "matrices") 'list))
         (configs '()))
    (flet ((config (run) (list (field run "format") (field run "path") (field run "threads"))))
      ;; configurations in the order the bench ran them
      (dolist (m matrices)
        (loop for r across (field m "runs") do (pushnew (config r) configs :test #'equal)))
      (setf configs (reverse configs))
      (with-open-file (out dat-path :direction :output :if-exists :supersede)
        (dolist (c configs)
          (destructuring-bind (format path threads) c
            (format out "\"~A ~A, ~D thread~:P\"~%" format path threads)
            (dolist (m matrices)
              (let ((r (find c (field m "runs") :key #'config :test #'equal)))
                (when (and r (field r "weight_gbps"))
                  (format out "~D ~F \"~A\"~%" (* (field m "rows") (field m "cols"))
                          (field r "weight_gbps")
                          (substitute #\' #\" (field m "name"))))))
            ;; two blank lines end a gnuplot data block
            (format out "~%~%")))))
    (with-open-file (out vars-path :direction :output :if-exists :supersede)
      (let ((probes (field (field json "read_bandwidth") "gbps_by_threads"))
            (machine (field json "machine")))
        (format out "nblocks = ~D~%" (length configs))
        (format out "probe1 = ~F~%probeN = ~F~%nthreads = ~D~%"
                (or (field (aref probes 0) "gbps") 0)
                (or (field (aref probes (1- (length probes))) "gbps") 0)
                (field (aref probes (1- (length probes))) "threads"))
        (format out "machine = \"~D cores, ~A\"~%" (field machine "cores")
                (field machine "simd_path"))))))
