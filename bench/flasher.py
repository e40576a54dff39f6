#!/usr/bin/python3
"""bench/stream.sh's X client on DISPLAY: the screen black, and a white flash over all of it now and then.

    flasher.py flash SECONDS OUT.json   every 1.0-1.4 s (jittered, so that flashes do not keep step with the
                                        capture clock) the whole root window white for 0.2 s; OUT gets the
                                        CLOCK_MONOTONIC time of each flash, taken once the X server has drawn
                                        it (XSync)
    flasher.py motion SECONDS           a moving gradient of bars at 30 Hz, content that keeps encoders busy
"""
import json
import random
import sys
import time

from Xlib import display


def main():
    mode, seconds = sys.argv[1], float(sys.argv[2])
    d = display.Display()
    root = d.screen().root
    gc = root.create_gc()
    geometry = root.get_geometry()
    width, height = geometry.width, geometry.height

    def fill(rgb, x=0, y=0, w=width, h=height):
        gc.change(foreground=rgb)
        root.fill_rectangle(gc, x, y, w, h)

    end = time.monotonic() + seconds
    if mode == "flash":
        flashes = []
        fill(0x000000)
        d.sync()
        time.sleep(1.0)
        while time.monotonic() < end - 1.0:
            fill(0xFFFFFF)
            d.sync()
            flashes.append(time.monotonic())
            time.sleep(0.2)
            fill(0x000000)
            d.sync()
            time.sleep(0.8 + random.random() * 0.4)
        json.dump({"flashes": flashes}, open(sys.argv[3], "w"))
    else:
        frame = 0
        bars = 16
        while time.monotonic() < end:
            for i in range(bars):
                shade = ((i * 16 + frame * 4) % 256)
                fill((shade << 16) | ((255 - shade) << 8) | (shade // 2), i * width // bars, 0, width // bars + 1, height)
            d.sync()
            frame += 1
            time.sleep(1 / 30)


main()
