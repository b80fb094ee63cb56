package flowtest

import (
	"encoding/xml"
	"io"
	"strings"
)

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Tests   int          `xml:"tests,attr"`
	Fails   int          `xml:"failures,attr"`
	Skips   int          `xml:"skipped,attr"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name  string      `xml:"name,attr"`
	Tests int         `xml:"tests,attr"`
	Fails int         `xml:"failures,attr"`
	Skips int         `xml:"skipped,attr"`
	Time  float64     `xml:"time,attr"`
	Cases []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes results as JUnit XML: one testsuite per test file.
func WriteJUnit(w io.Writer, results []*Result) error {
	out := junitSuites{}
	index := map[string]int{}
	for _, r := range results {
		i, ok := index[r.File.Path]
		if !ok {
			i = len(out.Suites)
			index[r.File.Path] = i
			out.Suites = append(out.Suites, junitSuite{Name: r.File.Path})
		}
		s := &out.Suites[i]
		c := junitCase{Name: r.Case.Name, Classname: r.File.Path, Time: r.Duration.Seconds()}
		switch {
		case r.Missing != nil:
			c.Skipped = &junitSkipped{Message: r.Missing.Error()}
			s.Skips++
			out.Skips++
		case !r.Pass:
			c.Failure = &junitFailure{Message: r.Problems[0], Text: strings.Join(r.Problems, "\n")}
			s.Fails++
			out.Fails++
		}
		s.Tests++
		s.Time += c.Time
		out.Tests++
		s.Cases = append(s.Cases, c)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
