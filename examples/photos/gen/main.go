//go:build ignore

// Command gen draws the example's product photos: small PNG and JPEG
// files of simple shapes, a few KB each. Run it from examples/photos:
//
//	go run gen/main.go
package main

import (
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"log"
	"os"
	"path/filepath"
)

// A photo is one product shot: a shape of a colour on a light background.
type photo struct {
	name  string
	shape string // "disc", "square", "bar"
	c     color.RGBA
}

func main() {
	photos := []photo{
		{"red-mug.png", "disc", color.RGBA{200, 30, 40, 255}},
		{"blue-box.png", "square", color.RGBA{30, 60, 200, 255}},
		{"green-lamp.jpg", "bar", color.RGBA{40, 160, 60, 255}},
		{"yellow-ball.png", "disc", color.RGBA{230, 200, 20, 255}},
		{"black-case.jpg", "square", color.RGBA{20, 20, 20, 255}},
	}
	for _, p := range photos {
		img := draw(p, 96, 72)
		f, err := os.Create(filepath.Join("photos", p.name))
		if err != nil {
			log.Fatal(err)
		}
		if filepath.Ext(p.name) == ".png" {
			err = png.Encode(f, img)
		} else {
			err = jpeg.Encode(f, img, &jpeg.Options{Quality: 80})
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

// draw returns a w×h picture of p.
func draw(p photo, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bg := color.RGBA{240, 238, 232, 255}
	cx, cy := w/2, h/2
	for y := range h {
		for x := range w {
			in := false
			dx, dy := x-cx, y-cy
			switch p.shape {
			case "disc":
				in = dx*dx+dy*dy < 28*28
			case "square":
				in = dx > -26 && dx < 26 && dy > -26 && dy < 26
			case "bar":
				in = dx > -8 && dx < 8 && dy > -30 && dy < 30
			}
			if in {
				img.Set(x, y, p.c)
			} else {
				img.Set(x, y, bg)
			}
		}
	}
	return img
}
