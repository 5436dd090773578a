;;;; svg.lisp - the pictures of `bench --model', `bench --questions', `eval'
;;;; and `calibrate' (--svg FILE): one self-contained SVG file each (no
;;;; script, no external font or image), written atomically as every other
;;;; output is (runtime/files.lisp).
;;;;
;;;; A figure is a title, a grid of panels and one legend on the right.  A
;;;; panel is either a chart of lines and marks (series of (x . y) points on
;;;; linear or logarithmic axes) or a chart of horizontal bars (a bar per
;;;; category and series, or one bar of stacked segments).  A series has one
;;;; colour in the whole figure, given by its name (the palette in order of
;;;; first appearance, or its own :colour), so the legend names each once.
;;;;
;;;; The elements carry classes for whoever reads the file back: each panel
;;;; is a <g class="panel"> holding <rect class="plot"> (the plotting
;;;; area), each series a <g class="series" data-series="NAME"> of a
;;;; <polyline class="line"> and <circle class="mark"> (or <rect
;;;; class="bar">), each legend entry a <g class="legend-entry"
;;;; data-series="NAME">.  Text is escaped for XML: markup characters as
;;;; entities, characters XML does not allow (control characters, the
;;;; U+DC80..U+DCFF of bytes that were not UTF-8) as U+FFFD.  Coordinates
;;;; are finite decimals; a point that is NIL, not a number or not finite
;;;; is left out, and a value on a logarithmic axis at or below zero is
;;;; drawn on the axis's floor.

(in-package "TEXT")

(defparameter *svg-palette*
  '("#1f77b4" "#ff7f0e" "#2ca02c" "#d62728" "#9467bd" "#8c564b" "#e377c2" "#393b79"
    "#bcbd22" "#17becf")
  "The colours of a figure's series, in order of first appearance (cycled
past the tenth).")

(defparameter *svg-panel-size* '(480 300)
  "A panel's width and height in pixels unless the figure says otherwise.")

(defparameter *svg-legend-width* 280
  "The width of the legend column on the right of a figure.")

;;; Text and numbers.

(defun svg-escape (string)
  "STRING as XML character data or an attribute value: & < > \" ' as
entities, a character XML 1.0 does not allow as U+FFFD."
  (with-output-to-string (out)
    (loop for c across (string string)
          for code = (char-code c)
          do (case c
               (#\& (write-string "&amp;" out))
               (#\< (write-string "&lt;" out))
               (#\> (write-string "&gt;" out))
               (#\" (write-string "&quot;" out))
               (#\' (write-string "&apos;" out))
               (t (write-char (if (or (and (< code 32) (not (member code '(9 10 13))))
                                      (<= #xD800 code #xDFFF) (member code '(#xFFFE #xFFFF)))
                                  (code-char #xFFFD)
                                  c)
                              out))))))

(defun svg-finite-p (x)
  "True when X is a real that is not a NaN or an infinity."
  (and (realp x)
       (not (and (floatp x) (or (ext:float-nan-p x) (ext:float-infinity-p x))))))

(defun svg-coordinate (x)
  "The finite real X as a coordinate: a decimal with two places."
  (format nil "~,2F" (float x 1d0)))

(defun svg-tick-text (v)
  "The tick value V as a short label: 0, a plain decimal from 0.001 up to a
million (trailing zeros dropped), else mantissa and exponent (2e-5)."
  (let ((a (abs v)))
    (cond ((zerop v) "0")
          ((and (>= a 1d-3) (< a 1d6))
           (let ((s (string-right-trim "0" (format nil "~,6F" (float v 1d0)))))
             (string-right-trim "." s)))
          (t (let* ((e (floor (log a 10d0)))
                    (m (/ v (expt 10d0 e))))
               ;; LOG may land a hair under an exact power
               (when (>= (abs m) 9.9999d0) (setf m (/ m 10) e (1+ e)))
               (if (< (abs (- m (round m))) 1d-6)
                   (format nil "~De~D" (round m) e)
                   (format nil "~,1Fe~D" m e)))))))

;;; Axes: (lo hi log ticks), LO and HI the ends in data units.

(defun svg-nice-step (span count)
  "A step of 1, 2 or 5 times a power of ten that cuts SPAN into about COUNT."
  (let* ((raw (/ span count))
         (power (expt 10d0 (floor (log raw 10d0))))
         (f (/ raw power)))
    (* power (cond ((<= f 1) 1) ((<= f 2) 2) ((<= f 5) 5) (t 10)))))

(defun svg-axis (values &key log from-zero)
  "An axis covering the finite reals VALUES (positive ones only when LOG):
(lo hi log ticks).  A linear axis starts at 0 with FROM-ZERO and ends on
ticks; a logarithmic one on powers of ten (every second or more when it
spans more than eight decades), with 2 and 5 between them when it spans
two decades or less."
  (let ((xs (remove-if-not (lambda (x) (and (svg-finite-p x) (or (not log) (plusp x)))) values)))
    (if log
        (let* ((lo (if xs (floor (log (reduce #'min xs) 10d0)) 0))
               (hi (if xs (ceiling (log (reduce #'max xs) 10d0)) 1))
               (hi (if (<= hi lo) (1+ lo) hi))
               (every (ceiling (- hi lo) 8)) ; at most 9 decades labelled
               (hi (+ lo (* every (ceiling (- hi lo) every))))
               (ticks (loop for e from lo to hi by every
                            for p = (expt 10d0 e)
                            collect p
                            when (and (<= (- hi lo) 2) (< e hi))
                              append (list (* 2 p) (* 5 p)))))
          (list (expt 10d0 lo) (expt 10d0 hi) t ticks))
        (let* ((lo (if xs (float (reduce #'min xs) 1d0) 0d0))
               (hi (if xs (float (reduce #'max xs) 1d0) 1d0))
               (lo (if from-zero (min 0d0 lo) lo))
               (hi (if (= hi lo) (+ lo (max 1d0 (abs lo))) hi))
               ;; whole numbers (tokens, layers, channels) get whole ticks
               (step (if (every #'integerp xs)
                         (max 1 (svg-nice-step (- hi lo) 5))
                         (svg-nice-step (- hi lo) 5)))
               (lo (* step (floor lo step)))
               (hi (* step (ceiling hi step))))
          (list lo hi nil (loop for i from 0 for v = (+ lo (* i step))
                                while (<= v (+ hi (* step 1d-9)))
                                collect v))))))

(defun svg-log-p (log values)
  "Whether an axis is logarithmic: LOG, or with LOG :auto when the positive
values of VALUES span more than two decades (so that the small ones show)."
  (if (eq log :auto)
      (let ((xs (remove-if-not (lambda (x) (and (svg-finite-p x) (plusp x))) values)))
        (and xs (> (reduce #'max xs) (* 100 (reduce #'min xs)))))
      log))

(defun svg-scale (axis value from to)
  "Where VALUE falls between the pixel positions FROM (the axis's low end)
and TO (its high end); on a logarithmic axis a value at or below zero, or
below the axis, falls on the low end."
  (destructuring-bind (lo hi log ticks) axis
    (declare (ignore ticks))
    (let ((f (if log
                 (if (plusp value)
                     (/ (- (log (max value lo) 10d0) (log lo 10d0)) (- (log hi 10d0) (log lo 10d0)))
                     0d0)
                 (/ (- value lo) (- hi lo)))))
      (+ from (* (- to from) f)))))

;;; Figures.

(defun svg-colours (panels)
  "An EQUAL hash table from each series name of PANELS to its colour, and
the names in order of first appearance."
  (let ((table (make-hash-table :test 'equal)) (names '()) (next 0))
    (dolist (panel panels)
      (dolist (series (getf panel :series))
        (let ((name (getf series :name)))
          (unless (gethash name table)
            (setf (gethash name table)
                  (or (getf series :colour)
                      (prog1 (nth (mod next (length *svg-palette*)) *svg-palette*) (incf next))))
            (push name names)))))
    (values table (nreverse names))))

(defun svg-panel-values (panel key)
  "Every finite value of PANEL on the axis KEY (:x or :y; a bar panel's
values are all on :x, and a stacked one's are the sums of its bars)."
  (if (getf panel :stacked)
      (loop for category in (getf panel :categories)
            collect (loop for series in (getf panel :series)
                          for v = (cdr (assoc category (getf series :points) :test #'equal))
                          when (svg-finite-p v) sum v))
      (svg-series-values panel key)))

(defun svg-series-values (panel key)
  "Every finite value of PANEL's series on the axis KEY, point by point."
  (loop for series in (getf panel :series)
        append (if (eq (getf panel :kind) :bars)
                   (loop for (nil . v) in (getf series :points)
                         when (svg-finite-p v) collect v)
                   (loop for (x . y) in (getf series :points)
                         when (and (svg-finite-p x) (svg-finite-p y))
                           collect (if (eq key :x) x y)))))

(defun svg-series-empty-p (series)
  "True when SERIES has no point to draw: no (x . y) of finite reals, or
for bars no (category . value) of a finite value."
  (notany (lambda (p) (and (svg-finite-p (cdr p)) (or (stringp (car p)) (svg-finite-p (car p)))))
          (getf series :points)))

(defun svg-panel-empty-p (panel)
  "True when PANEL has no finite value to draw."
  (null (svg-panel-values panel :x)))

(defun svg-text (out x y text &key (anchor "start") (size 12) class (weight nil) rotate)
  "A <text> element of TEXT (escaped) at X Y on OUT, anchored at ANCHOR's
end, of font SIZE, with CLASS and WEIGHT when given, turned upright along
the left edge with ROTATE."
  (format out "<text x=\"~A\" y=\"~A\" font-size=\"~D\" text-anchor=\"~A\"~@[ class=\"~A\"~]~
~@[ font-weight=\"~A\"~]~@[ transform=\"rotate(-90 ~A)\"~]>~A</text>~%"
          (svg-coordinate x) (svg-coordinate y) size anchor class weight
          (and rotate (format nil "~A ~A" (svg-coordinate x) (svg-coordinate y)))
          (svg-escape text)))

(defun svg-axes (out panel x-axis y-axis left top width height)
  "The plotting area, grid, ticks, tick labels and axis labels of PANEL."
  (format out "<rect class=\"plot\" x=\"~A\" y=\"~A\" width=\"~A\" height=\"~A\" fill=\"#ffffff\" ~
stroke=\"#444444\"/>~%" (svg-coordinate left) (svg-coordinate top)
          (svg-coordinate width) (svg-coordinate height))
  (when x-axis
    (dolist (v (fourth x-axis))
      (let ((px (svg-scale x-axis v left (+ left width))))
        (format out "<line class=\"grid\" x1=\"~A\" y1=\"~A\" x2=\"~A\" y2=\"~A\" stroke=\"#e4e4e4\"/>~%"
                (svg-coordinate px) (svg-coordinate top) (svg-coordinate px)
                (svg-coordinate (+ top height)))
        (svg-text out px (+ top height 15) (svg-tick-text v) :anchor "middle" :size 11 :class "tick"))))
  (when y-axis
    (dolist (v (fourth y-axis))
      (let ((py (svg-scale y-axis v (+ top height) top)))
        (format out "<line class=\"grid\" x1=\"~A\" y1=\"~A\" x2=\"~A\" y2=\"~A\" stroke=\"#e4e4e4\"/>~%"
                (svg-coordinate left) (svg-coordinate py) (svg-coordinate (+ left width))
                (svg-coordinate py))
        (svg-text out (- left 5) (+ py 4) (svg-tick-text v) :anchor "end" :size 11 :class "tick"))))
  (when (getf panel :x-label)
    (svg-text out (+ left (/ width 2)) (+ top height 34) (getf panel :x-label)
              :anchor "middle" :class "x-label"))
  (when (getf panel :y-label)
    (svg-text out (- left 56) (+ top (/ height 2)) (getf panel :y-label)
              :anchor "middle" :class "y-label" :rotate t)))

(defun svg-line-series (out series colour x-axis y-axis left top width height)
  "SERIES of a lines panel on OUT in COLOUR: a polyline through its finite
points (dashed with :dashed; none with :line NIL or one point) and a mark
at each (none with :marker NIL)."
  (let ((points (loop for (x . y) in (getf series :points)
                      when (and (svg-finite-p x) (svg-finite-p y))
                        collect (cons (svg-scale x-axis x left (+ left width))
                                      (svg-scale y-axis y (+ top height) top)))))
    (format out "<g class=\"series\" data-series=\"~A\">~%" (svg-escape (getf series :name)))
    (when (and (getf series :line t) (rest points))
      (format out "<polyline class=\"line\" fill=\"none\" stroke=\"~A\" stroke-width=\"~A\"~
~:[~; stroke-dasharray=\"6 4\"~] points=\"~{~A~^ ~}\"/>~%"
              colour (if (getf series :marker t) 2 1.5) (getf series :dashed)
              (mapcar (lambda (p) (format nil "~A,~A" (svg-coordinate (car p)) (svg-coordinate (cdr p))))
                      points)))
    (when (getf series :marker t)
      (dolist (p points)
        (format out "<circle class=\"mark\" cx=\"~A\" cy=\"~A\" r=\"~A\" fill=\"~A\"/>~%"
                (svg-coordinate (car p)) (svg-coordinate (cdr p))
                (if (getf series :line t) 4 5) colour)))
    (format out "</g>~%")))

(defun svg-bar-panel (out panel colours x-axis left top width height)
  "PANEL's bars: its :categories top to bottom, in each a bar per series
of its :series (whose :points are (category . value)), or with :stacked
one bar of every series' segments end to end."
  (let* ((categories (getf panel :categories))
         (series (getf panel :series))
         (stacked (getf panel :stacked))
         (per (if stacked 1 (length series)))
         (band (/ height (max 1 (length categories))))
         (bar (/ (* 0.8 band) per)))
    (loop for category in categories for i from 0
          for y0 = (+ top (* i band) (* 0.1 band))
          do (svg-text out (- left 6) (+ y0 (* 0.4 band) 4) category :anchor "end" :size 11
                       :class "category"))
    (loop with ends = (make-hash-table :test 'equal)
          for s in series for j from 0
          do (format out "<g class=\"series\" data-series=\"~A\">~%" (svg-escape (getf s :name)))
             (loop for category in categories for i from 0
                   for v = (cdr (assoc category (getf s :points) :test #'equal))
                   when (svg-finite-p v)
                     do (let* ((start (if stacked (gethash category ends 0d0) 0d0))
                               (end (+ start v))
                               (x0 (svg-scale x-axis start left (+ left width)))
                               (x1 (svg-scale x-axis end left (+ left width)))
                               (y (+ top (* i band) (* 0.1 band) (if stacked 0 (* j bar)))))
                          (setf (gethash category ends) end)
                          (format out "<rect class=\"bar\" x=\"~A\" y=\"~A\" width=\"~A\" height=\"~A\" ~
fill=\"~A\"><title>~A: ~A</title></rect>~%"
                                  (svg-coordinate x0) (svg-coordinate y) (svg-coordinate (max 0 (- x1 x0)))
                                  (svg-coordinate (* 0.9 bar)) (gethash (getf s :name) colours)
                                  (svg-escape category) (svg-tick-text (float v 1d0)))))
             (format out "</g>~%"))))

(defun svg-panel (out panel colours left top width height)
  "PANEL drawn in the box LEFT TOP WIDTH HEIGHT: its title above the
plotting area, the axes and the series."
  (let* ((bars (eq (getf panel :kind) :bars))
         (pl (+ left (if bars 130 70))) (pt (+ top 26))
         (pw (- width (if bars 150 90))) (ph (- height 70))
         (x-values (svg-panel-values panel :x))
         (x-axis (svg-axis x-values :log (svg-log-p (getf panel :x-log) x-values) :from-zero bars))
         (y-axis (and (not bars) (svg-axis (svg-panel-values panel :y) :log (getf panel :y-log)))))
    (format out "<g class=\"panel\" data-title=\"~A\">~%" (svg-escape (getf panel :title "")))
    (svg-text out (+ pl (/ pw 2)) (+ top 16) (getf panel :title "") :anchor "middle" :size 13
                                                                    :class "panel-title" :weight "bold")
    (svg-axes out panel x-axis y-axis pl pt pw ph)
    (if bars
        (svg-bar-panel out panel colours x-axis pl pt pw ph)
        (dolist (series (getf panel :series))
          (svg-line-series out series (gethash (getf series :name) colours) x-axis y-axis pl pt pw ph)))
    (format out "</g>~%")))

(defun svg-legend (out names colours panels left top)
  "One entry per series name: a swatch of its colour (a dashed line for a
dashed series, a bar for bars) and the name."
  (let ((styles (make-hash-table :test 'equal)))
    (dolist (panel panels)
      (dolist (s (getf panel :series))
        (setf (gethash (getf s :name) styles) (list (getf panel :kind) s))))
    (format out "<g class=\"legend\">~%")
    (loop for name in names for i from 0
          for y = (+ top (* i 20))
          for (kind s) = (gethash name styles)
          for colour = (gethash name colours)
          do (format out "<g class=\"legend-entry\" data-series=\"~A\">~%" (svg-escape name))
             (cond
               ((eq kind :bars)
                (format out "<rect x=\"~A\" y=\"~A\" width=\"16\" height=\"10\" fill=\"~A\"/>~%"
                        (svg-coordinate left) (svg-coordinate (- y 9)) colour))
               ((not (getf s :line t))
                (format out "<circle cx=\"~A\" cy=\"~A\" r=\"5\" fill=\"~A\"/>~%"
                        (svg-coordinate (+ left 10)) (svg-coordinate (- y 4)) colour))
               (t
                (format out "<line x1=\"~A\" y1=\"~A\" x2=\"~A\" y2=\"~A\" stroke=\"~A\" stroke-width=\"2\"~
~:[~; stroke-dasharray=\"6 4\"~]/>~%"
                         (svg-coordinate left) (svg-coordinate (- y 4)) (svg-coordinate (+ left 20))
                        (svg-coordinate (- y 4)) colour (getf s :dashed))))
             (svg-text out (+ left 26) y name :size 12)
             (format out "</g>~%"))
    (format out "</g>~%")))

(defun svg-nothing-to-plot (path what)
  "Signal FILE-IO-ERROR about the SVG PATH: WHAT (a phrase) gave nothing to plot."
  (file-io-error path "expected ~A to plot, found none" what))

(defun check-svg-target (path)
  "Refuse, before any work, an SVG target PATH that cannot be written: a
directory or other file that is not a regular file, a missing directory,
one where a file cannot be made (FILE-IO-ERROR naming PATH); and - (USAGE-ERROR:
standard output has the table)."
  (when (string= path "-")
    (usage-error "--svg -: expected a file name for the picture, found - (standard output ~
has the table)"))
  (let ((kind (path-kind path)))
    (when (and kind (not (eq kind :file)))
      (file-io-error path "expected a regular file or no file for the SVG, found a ~(~A~)" kind)))
  (let* ((slash (position #\/ path :from-end t))
         (dir (if slash (subseq path 0 (1+ slash)) "./"))
         (kind (path-kind dir)))
    (unless (eq kind :directory)
      (file-io-error path "expected an existing directory ~A for the SVG, found ~:[nothing~;~:*a ~(~A~)~]"
                     dir kind)))
  (handler-case (with-temporary-file (probe path "svg")
                  (write-file-atomically probe (list (make-array 0 :element-type '(unsigned-byte 8)))))
    (file-io-error (c)
      (file-io-error path "expected a place to write the SVG, found none: ~A"
                     (rontolisp-error-message c))))
  path)

(defun write-svg-figure (path title panels &key what (columns 2) notes
                                              (panel-size *svg-panel-size*))
  "Write the figure TITLE of PANELS, in a grid COLUMNS wide, with one legend,
to PATH as a self-contained SVG, atomically.  A panel is a plist: :title,
:kind (:lines, the default, or :bars), :series (plists of :name, :points,
and for lines :dashed, :line (default T), :marker (default T), :colour),
:x-label, :y-label, :x-log, :y-log (T, or for bars :auto: logarithmic
when the values span more than two decades), for bars :categories and
:stacked.
NOTES are lines of text under the panels.  Panels with nothing finite to
draw are left out, and so are series without a point; when none is left, FILE-IO-ERROR says WHAT (a phrase)
gave nothing to plot.  Answers PATH."
  (let ((panels (remove-if #'svg-panel-empty-p
                            (mapcar (lambda (panel)
                                      (list* :series (remove-if #'svg-series-empty-p
                                                                (getf panel :series))
                                             panel))
                                    panels))))
    (unless panels
      (svg-nothing-to-plot path (or what "data")))
    (multiple-value-bind (colours names) (svg-colours panels)
      (destructuring-bind (pw ph) panel-size
        (let* ((columns (max 1 (min columns (length panels))))
               (rows (ceiling (length panels) columns))
               (top 40)
               (width (+ (* columns pw) *svg-legend-width*))
               (height (max (+ top (* rows ph) (* 18 (length notes)) 10)
                            (+ top (* 20 (length names)) 20))))
          (with-output-to-file (out path)
            (format out "<?xml version=\"1.0\" encoding=\"UTF-8\"?>~%~
<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"~D\" height=\"~D\" viewBox=\"0 0 ~D ~D\" ~
font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">~%<title>~A</title>~%~
<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>~%"
                    width height width height (svg-escape title))
            (svg-text out 12 24 title :size 15 :class "title" :weight "bold")
            (loop for panel in panels for i from 0
                  do (multiple-value-bind (row column) (floor i columns)
                       (svg-panel out panel colours (* column pw) (+ top (* row ph)) pw ph)))
            (svg-legend out names colours panels (+ (* columns pw) 10) (+ top 30))
            (loop for note in notes for i from 0
                  do (svg-text out 12 (+ top (* rows ph) 14 (* 18 i)) note :size 11 :class "note"))
            (format out "</svg>~%")))))
    path))
